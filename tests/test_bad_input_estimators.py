"""Bad (and extreme but valid) input to the estimators and to ``sets_from_frame`` (issue 27).

The rule: bad input raises a clear ``ValueError`` / ``TypeError`` naming the problem; valid input
gets a right answer; never a silent NaN or infinity. One test per defect of the issue, named
after its number.
"""

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone

import skset
from skset import (
    ABCClusterer,
    DeepSetsClassifier,
    DeepSetsRegressor,
    NystromFeatures,
    OTKClassifier,
    OTKEmbedding,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

NN = dict(hidden_size=8, n_layers=1, max_iter=2, batch_size=64, random_state=0, device="cpu")
OTKS = dict(n_components=4, n_supports=2, max_iter=1, batch_size=64, random_state=0,
            device="cpu")
REGRESSORS = [
    SetTransformerRegressor(n_heads=2, n_inducing=None, **NN),
    DeepSetsRegressor(**NN),
    OTKRegressor(**OTKS),
]
SUPERVISED = [
    SetTransformerClassifier(n_heads=2, n_inducing=None, **NN),
    DeepSetsClassifier(**NN),
    OTKClassifier(**OTKS),
    *REGRESSORS,
]
TRANSFORMERS = [OTKEmbedding(n_supports=2, random_state=0, device="cpu"),
                NystromFeatures(n_components=3, random_state=0, device="cpu")]
WEIGHTED = SUPERVISED + TRANSFORMERS


def _ids(ests):
    return [type(e).__name__ for e in ests]


def _data(n=8, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(2, 5)), 2)) for _ in range(n)]
    y_cls = np.arange(n) % 2
    y_reg = np.array([x.mean() for x in X]) + 0.1 * rng.normal(size=n)
    return X, y_cls, y_reg


def _target(est, yc, yr):
    if isinstance(est, (OTKEmbedding, NystromFeatures)):
        return None
    return yc if hasattr(est, "predict_proba") else yr


def _output(est, X):
    if isinstance(est, NystromFeatures):  # per-element features: list in, list out
        return np.concatenate(est.transform(X))
    return est.transform(X) if isinstance(est, OTKEmbedding) else est.predict(X)


@pytest.mark.parametrize("est", REGRESSORS, ids=_ids(REGRESSORS))
@pytest.mark.parametrize("factor", [1e300, 1e-300])
def test_defect_02_extreme_target_scale(est, factor):
    """Targets around 1e300 or 1e-300 are valid: the target mean and scale are computed in
    float64 without overflow or underflow, so the predictions are those of the unit-scale targets
    times the factor (not inf/NaN, not the mean plus unscaled noise)."""
    X, _, y = _data()
    for dtype in ("float64", "float32"):
        base = clone(est).set_params(dtype=dtype).fit(X, y).predict(X)
        big = clone(est).set_params(dtype=dtype).fit(X, y * factor).predict(X)
        assert np.isfinite(big).all(), big
        rtol = 1e-6 if dtype == "float64" else 1e-3
        np.testing.assert_allclose(big / factor, base, rtol=rtol, atol=1e-3 * np.abs(base).max())


@pytest.mark.parametrize("est", REGRESSORS[1:2], ids=_ids(REGRESSORS[1:2]))
def test_defect_02_unrepresentable_targets_are_rejected(est):
    """Targets whose standardised values cannot be represented in the working dtype (a warm
    start on targets 1e300 times the first fit's scale) raise a clear ValueError."""
    X, _, y = _data()
    reg = clone(est).set_params(warm_start=True).fit(X, y)
    with pytest.raises(ValueError, match="targets"):
        reg.fit(X, y * 1e300)


@pytest.mark.parametrize("est", WEIGHTED, ids=_ids(WEIGHTED))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0, float("nan"), np.float32(np.nan)])
def test_defect_03_scalar_nan_sample_weight(est, bad):
    """A scalar ``sample_weight`` is checked like an array of weights: NaN, infinity or a
    negative value raise a ValueError naming sample_weight (NaN raised IndexError, infinity was
    accepted)."""
    X, yc, yr = _data()
    with pytest.raises(ValueError, match="sample_weight"):
        clone(est).fit(X, _target(est, yc, yr), sample_weight=bad)
    with pytest.raises(ValueError, match="sample_weight"):
        clone(est).fit(X, _target(est, yc, yr), sample_weight=np.full(len(X), bad))


@pytest.mark.parametrize("est", WEIGHTED, ids=_ids(WEIGHTED))
def test_defect_03_valid_scalar_sample_weight(est):
    """A valid scalar weight is a constant weight: exactly the unweighted fit."""
    X, yc, yr = _data()
    y = _target(est, yc, yr)
    ref = _output(clone(est).fit(X, y), X)
    np.testing.assert_array_equal(_output(clone(est).fit(X, y, sample_weight=2.5), X), ref)


@pytest.mark.parametrize("est", WEIGHTED, ids=_ids(WEIGHTED))
@pytest.mark.parametrize("factor", [1e39, 1e-46, 1e300, 1e-300])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_defect_04_extreme_relative_weights(est, factor, dtype):
    """Only relative weights matter: weights times 1e39 or 1e-46 (beyond float32) or 1e+-300
    fit like the weights themselves (they are normalised in float64 before any cast; the
    FloatingPointError / 'all zero' errors came from casting them to float32 first)."""
    X, yc, yr = _data()
    y = _target(est, yc, yr)
    w = np.array([1.0, 2, 3, 1, 2, 3, 1, 2])
    est = clone(est).set_params(dtype=dtype)
    ref = _output(clone(est).fit(X, y, sample_weight=w), X)
    w_scaled = w * factor
    w_copy = w_scaled.copy()
    out = _output(clone(est).fit(X, y, sample_weight=w_scaled), X)
    np.testing.assert_array_equal(w_scaled, w_copy)  # not modified in place
    assert np.isfinite(out).all()
    tol = 1e-6 if dtype == "float64" else 1e-3
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


def _frames():
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")

    return [("pandas", pd.DataFrame), ("polars", pl.DataFrame)]


@pytest.mark.parametrize("by", [[], ()])
def test_defect_08_empty_by(by):
    """``by=[]`` names no id column: a clear ValueError (it raised IndexError)."""
    import pandas as pd

    df = pd.DataFrame({"s": [0, 0, 1], "x": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="by"):
        skset.sets_from_frame(df, by=by)
    with pytest.raises(ValueError, match="by"):
        skset.frame_from_sets([np.zeros(2), np.zeros(1)], [0, 1], by=by)


@pytest.mark.parametrize("ids", [None, "ab", b"ab", 3])
def test_frame_from_sets_ids_not_a_sequence(ids):
    """``ids`` of None or a number named ids (a bare "not iterable"); a string of as many
    characters as sets was read as one id per character."""
    with pytest.raises(TypeError, match="ids must be a sequence"):
        skset.frame_from_sets([np.zeros(2), np.zeros(1)], ids)


@pytest.mark.parametrize("lib", ["pandas", "polars"])
@pytest.mark.parametrize("where", ["by", "order_by"])
def test_defect_09_nan_key_polars(lib, where):
    """NaN in the id column (``by``) or in ``order_by`` is rejected with the same ValueError by
    both back ends (polars accepted it silently: NaN is not null there)."""
    ctor = dict(_frames())[lib]
    data = {"s": [0.0, 0.0, 1.0, 1.0], "t": [0.0, 1.0, 0.0, 1.0], "x": [1.0, 2.0, 3.0, 4.0]}
    col = "s" if where == "by" else "t"
    data[col][2] = np.nan
    df = ctor(data)
    with pytest.raises(ValueError, match=rf"{where} column\(s\) \['{col}'\] have missing values"):
        skset.sets_from_frame(df, by="s", order_by="t")


@pytest.mark.parametrize("cls", [OTKClassifier, OTKRegressor])
def test_defect_11_otk_max_elements_none(cls):
    """``max_elements=None`` is rejected by the supervised OTK estimators' own parameter check
    (it passed and then failed inside OTKEmbedding)."""
    X, yc, yr = _data()
    est = cls(max_elements=None, **OTKS)
    with pytest.raises(ValueError, match=rf"{cls.__name__}: max_elements=None is not valid"):
        est.fit(X, yc if cls is OTKClassifier else yr)


@pytest.fixture(scope="module")
def abc_fitted():
    rng = np.random.default_rng(0)
    X, y = [], []
    for _ in range(6):
        lab = np.repeat([0, 1], 6)
        X.append(rng.normal(size=(12, 2)) + 4 * lab[:, None])
        y.append(lab)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        abc = ABCClusterer(hidden_size=8, n_heads=2, max_steps=2, batch_size=4, eval_every=2,
                           input_similarity=None, random_state=0).fit(X, y)
    return abc, X


@pytest.mark.parametrize("bad", [2.5, np.float64(2.0), True, [2, 2.5], "2"])
def test_defect_14_abc_non_integer_n_clusters(abc_fitted, bad):
    """``ABCClusterer.predict(n_clusters=2.5)`` raises (it silently used 2); so do a float
    2.0, a bool, a float in a per-instance list and a string."""
    abc, X = abc_fitted
    with pytest.raises((ValueError, TypeError), match="n_clusters"):
        abc.predict(X[:2], n_clusters=bad)
    labels = abc.predict(X[:2], n_clusters=np.int64(2))
    assert all(len(np.unique(lab)) <= 2 for lab in labels)


def test_labels_complex_ragged_or_missing_are_named():
    from skset._sets import check_set_labels

    with pytest.raises(TypeError, match="y holds complex numbers"):
        check_set_labels(np.array([1 + 5j, 2, 3]), 3)
    with pytest.raises(ValueError, match="y is ragged"):
        check_set_labels([[1], [1, 2], [1]], 3, multi_output=True)
    with pytest.raises(ValueError, match="y contains a missing label"):  # not "mixes label types"
        check_set_labels(np.array([1, None], dtype=object), 2)
    # NaN or pandas' NA among string labels: missing too (it said "mixes label types")
    with pytest.raises(ValueError, match="y contains a missing label"):
        check_set_labels(np.array(["a", np.nan, "b"], dtype=object), 3)
    pd = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match="y contains a missing label"):
        check_set_labels(pd.array(["a", None, "b"], dtype="string"), 3)
    assert list(check_set_labels(np.array(["a", "b", "a"], dtype=object), 3)) == ["a", "b", "a"]
    # a plain list mixing strings and numbers: numpy would read every label as a string
    with pytest.raises(TypeError, match="y mixes label types"):
        check_set_labels(["a", 1, "a"], 3)
    with pytest.raises(ValueError, match="y contains a missing label"):
        check_set_labels(["a", None, "b"], 3)
    assert list(check_set_labels(["a", "b", "a"], 3)) == ["a", "b", "a"]


def test_element_weight_as_a_data_frame_is_read_by_rows():
    """A frame of weights (one row per set of equal size) is read as its rows: iterating it gave
    its column labels ("holds 3 entries but X holds 2 sets")."""
    from skset._weighting import check_element_weights

    pd = pytest.importorskip("pandas")
    w = pd.DataFrame([[1.0, 2.0, 1.0], [0.0, 1.0, 1.0]])
    out = check_element_weights(w, [3, 3])
    np.testing.assert_allclose(out[0], [0.25, 0.5, 0.25])
    np.testing.assert_allclose(out[1], [0.0, 0.5, 0.5])
    np.testing.assert_array_equal(w.to_numpy(), [[1.0, 2.0, 1.0], [0.0, 1.0, 1.0]])  # unchanged


CLASSIFIERS = SUPERVISED[:3]


@pytest.mark.parametrize("est", CLASSIFIERS, ids=_ids(CLASSIFIERS))
def test_classifier_labels_continuous_ragged_or_not_scalars_are_named(est):
    """Real-valued targets given to a classifier, a ragged ``y`` and labels that are lists or
    dicts each get a message naming ``y``, before any training; whole-number floats are
    classes."""
    X, y_cls, y_reg = _data(12)
    kind = type(est).__name__.replace("Classifier", "Regressor")
    with pytest.raises(ValueError, match=f"y holds continuous values.*use {kind}"):
        clone(est).fit(X, y_reg)
    with pytest.raises(ValueError, match="y is ragged"):
        clone(est).fit(X, [[1], [1, 2]] * 6)
    for labels, kind in (([[1], [1, 2]] * 6, "list"), ([{"a": 1}, {"b": 2}] * 6, "dict")):
        y = np.empty(12, dtype=object)
        y[:] = labels
        with pytest.raises(TypeError, match=f"y holds labels of type \\['{kind}'\\]"):
            clone(est).fit(X, y)
    assert clone(est).fit(X, y_cls.astype(float)).classes_.tolist() == [0.0, 1.0]


@pytest.mark.parametrize("est", REGRESSORS, ids=_ids(REGRESSORS))
def test_targets_without_columns_are_named(est):
    X, _, _ = _data()
    with pytest.raises(ValueError, match=r"y has shape \(8, 0\): no target columns"):
        clone(est).fit(X, np.zeros((8, 0)))


@pytest.mark.parametrize("est", WEIGHTED, ids=_ids(WEIGHTED))
def test_a_none_set_and_a_flat_x_are_named(est):  # a 1-D X is neither a pool nor sets
    X, yc, yr = _data()
    with pytest.raises(ValueError, match=r"set 3 is None; expected a 2-D array"):
        clone(est).fit(X[:3] + [None] + X[4:], _target(est, yc, yr))
    with pytest.raises(ValueError, match=r"X is a 1-D array of shape \(8,\); expected a collection"):
        clone(est).fit(np.arange(8.0), _target(est, yc, yr))


def test_an_object_array_of_frames_is_checked_as_a_list_of_them():
    """Sets as a 1-D object array of data frames: their columns are read as a list's
    (``feature_names_in_``; other columns refused: they were accepted, read by position)."""
    pd = pytest.importorskip("pandas")
    from skset import OTKEmbedding

    rng = np.random.default_rng(0)
    dfs = [pd.DataFrame(rng.normal(size=(6, 3)), columns=list("abc")) for _ in range(5)]
    X = np.empty(5, dtype=object)
    X[:] = dfs
    est = OTKEmbedding(n_supports=3, random_state=0).fit(X)
    assert list(est.feature_names_in_) == ["a", "b", "c"]
    Y = np.empty(5, dtype=object)
    Y[:] = [d[["c", "b", "a"]] for d in dfs]
    with pytest.raises(ValueError, match=r"the sets have the columns \['c', 'b', 'a'\]"):
        est.transform(Y)
    np.testing.assert_array_equal(est.transform(X), est.transform(dfs))


def test_nystrom_pool_kmers_with_zero_weights_and_tiny_sphere_bandwidth():
    """A 2-D pool cut into coded k-mers with rows of weight 0 fits (an IndexError: the k-mers'
    weights were read as the rows'); a bandwidth given on the unit sphere too small for the
    dtype is refused by fit, as the data-scaled one is (transform raised a torch overflow)."""
    rng = np.random.default_rng(0)
    pool = rng.normal(size=(20, 2))
    sw = np.ones(20)
    sw[3:5] = 0
    for coding in ("level_shape", "plain"):
        est = skset.NystromFeatures(n_components=4, window=2, kmer_coding=coding, random_state=0)
        assert est.fit(pool, sample_weight=sw).transform(pool).shape == (19, 4)
    sets = [rng.normal(size=(6, 2)) for _ in range(5)]
    with pytest.raises(ValueError, match=r"bandwidth=1e-20 on the unit sphere is out of the range"):
        skset.NystromFeatures(n_components=4, normalize=True, bandwidth=1e-20).fit(sets)


def test_nystrom_partial_fit_names_the_fitted_dilation():
    """k-mers of the same size but another dilation: the message says so and names the fitted
    dilation (it claimed a size mismatch, '8 values, but the fitted anchors have 8')."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(20, 2)) for _ in range(5)]
    est = skset.NystromFeatures(n_components=4, window=3, random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"read other k-mers than the fitted anchors \(fitted with "
                                         r"window=3, kmer_coding='level_shape', dilation=1\)"):
        est.set_params(dilation=2).partial_fit(X)


def test_nystrom_errors_name_sets_by_their_place_in_x_with_zero_weights():
    """With sets of weight 0 the fit reads the others only; its errors still name a set by its
    place in X (set 1 for the caller's set 3, a count of 2 sets for 4), and a set of weight 0
    is not checked (as if removed)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(10, 2)) for _ in range(4)]
    X[3] = X[3][:2]
    sw = [0, 0, 1, 1]
    est = skset.NystromFeatures(n_components=4, window=3, random_state=0)
    with pytest.raises(ValueError, match="set 3 has 2 elements"):
        est.fit(X, sample_weight=sw)
    X[3] = rng.normal(size=(10, 2))
    ew = [np.ones(len(x)) for x in X]
    ew[3][0] = np.nan
    with pytest.raises(ValueError, match="element_weight: set 3 contains NaN"):
        est.fit(X, sample_weight=sw, element_weight=ew)
    with pytest.raises(ValueError, match="holds 3 entries but X holds 4 sets"):
        est.fit(X, sample_weight=sw, element_weight=ew[:3])
    X[1], ew[1][0] = X[1][:2], np.nan  # weight 0: neither short nor NaN masses matter
    ew[3][0] = 1.0
    assert est.fit(X, sample_weight=sw, element_weight=ew).transform(X[2:])[0].shape == (8, 4)


CLASSIFIERS = [e for e in SUPERVISED if hasattr(e, "predict_proba")]


@pytest.mark.parametrize("est", CLASSIFIERS, ids=_ids(CLASSIFIERS))
def test_a_column_vector_of_labels_is_read_with_scikit_learns_warning(est):
    # scikit-learn's classifiers warn (DataConversionWarning) and ravel y of shape (n, 1); the
    # set classifiers raveled it silently. Regressors keep (n, 1) as one output, as Ridge does.
    from sklearn.exceptions import DataConversionWarning

    X, yc, yr = _data()
    with pytest.warns(DataConversionWarning, match=r"column-vector y .* \(8,\)"):
        col = clone(est).fit(X, yc[:, None])
    np.testing.assert_array_equal(col.predict(X), clone(est).fit(X, yc).predict(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataConversionWarning)
        assert clone(REGRESSORS[1]).fit(X, yr[:, None]).predict(X).shape == (8, 1)


def test_column_vector_warns_once_with_early_stopping_and_otk_starts_quietly():
    # the targets were read twice with early stopping (two warnings); the supervised models'
    # inner barycenter warned to raise a barycenter_iter they do not have
    from sklearn.exceptions import ConvergenceWarning, DataConversionWarning

    X, yc, _ = _data(24)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DeepSetsClassifier(early_stopping=True, **NN).fit(X, yc[:, None])
    assert sum(w.category is DataConversionWarning for w in caught) == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        OTKClassifier(fit_method="wasserstein", **OTKS).fit(X, yc)
    assert not [w for w in caught if w.category is ConvergenceWarning
                and "barycenter" in str(w.message)]
