"""The targets of the neural set estimators, read as scikit-learn reads them: real values and
mixed label types in an object array are no classes, ``partial_fit``'s ``classes`` is checked as
``y`` is, a regressor's ``partial_fit`` takes no ``classes``, and the messages name what ``y`` is
(a generator, a dict, an indicator matrix with NaN) and the call that was made."""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import make_sets
from sklearn.exceptions import DataConversionWarning

from skset.neural_network import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    OTKClassifier,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

SMALL = {
    SetTransformerClassifier: dict(hidden_size=4, n_heads=1, n_layers=1, n_inducing=2),
    SetTransformerRegressor: dict(hidden_size=4, n_heads=1, n_layers=1, n_inducing=2),
    DeepSetsClassifier: dict(hidden_size=4),
    DeepSetsRegressor: dict(hidden_size=4),
    OTKClassifier: dict(n_components=4, n_supports=2),
    OTKRegressor: dict(n_components=4, n_supports=2),
}
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

CLASSIFIERS = [SetTransformerClassifier, DeepSetsClassifier, OTKClassifier]
REGRESSORS = [SetTransformerRegressor, DeepSetsRegressor, OTKRegressor]


def _make(cls, **kw):
    return cls(**{**SMALL[cls], "max_iter": 1, "random_state": 0, "device": "cpu", **kw})


def _X(n=12):
    return make_sets(np.random.default_rng(0), n_sets=n, d=2, low=2, high=5)


@pytest.mark.parametrize("cls", CLASSIFIERS, ids=lambda c: c.__name__)
def test_object_array_of_real_values_or_mixed_numbers_is_no_classes(cls):
    """Real values in an object column (12 sets, 12 distinct floats) are refused as the same
    values in a float array are; an object array mixing bools, integers and floats (scikit-learn:
    an unknown label type) too, before any training."""
    X = _X()
    real = np.random.default_rng(1).normal(size=12)
    regressor = cls.__name__.replace("Classifier", "Regressor")
    for y in (real, pd.Series(real, dtype=object), np.array(real, dtype=object)):
        with pytest.raises(ValueError, match=f"y holds continuous values .*use {regressor}"):
            _make(cls).fit(X, y)
    for labels in ([1, 2.0, 3] * 4, [True, 2, 3] * 4, [True, 1.0, 0.0] * 4):
        y = np.empty(12, dtype=object)
        y[:] = labels
        with pytest.raises(ValueError, match=r"y holds labels of mixed types \(.*\) in an object"):
            _make(cls).fit(X, y)
        with pytest.raises(ValueError, match="y holds labels of mixed types"):
            _make(cls).fit(X, pd.Series(y))
    assert not hasattr(_make(cls), "classes_")


def test_object_labels_of_one_kind_stay_classes():
    """Strings, integers, bools and whole floats in object arrays, and pandas' nullable dtypes,
    are classes as before."""
    X = _X()
    cases = {
        "str": (np.array(["a", "b", "c"] * 4, dtype=object), ["a", "b", "c"]),
        "int": (np.array([3, -1, 7] * 4, dtype=object), [-1, 3, 7]),
        "bool": (np.array([True, False] * 6, dtype=object), [False, True]),
        "whole-float": (np.array([1.0, 2.0, 5.0] * 4, dtype=object), [1.0, 2.0, 5.0]),
        "Int64": (pd.Series([0, 4, 2] * 4, dtype="Int64"), [0, 2, 4]),
        "boolean": (pd.Series([True, False] * 6, dtype="boolean"), [False, True]),
        "Float64": (pd.Series([1.0, 2.0] * 6, dtype="Float64"), [1.0, 2.0]),
    }
    for name, (y, classes) in cases.items():
        clf = _make(DeepSetsClassifier).fit(X, y)
        assert clf.classes_.tolist() == classes, name
        assert set(clf.predict(X).tolist()) <= set(classes), name


@pytest.mark.parametrize("cls", [DeepSetsClassifier, OTKClassifier], ids=lambda c: c.__name__)
def test_partial_fit_classes_are_checked_as_y_is(cls):
    """``classes`` holding NaN, infinity or None, or of two dimensions, is refused with a
    ValueError naming it (as scikit-learn's ``SGDClassifier.partial_fit``), on the first call
    and on a later one, and the estimator stays as it was."""
    X, y = _X(8), np.array([0, 1] * 4)
    bad = {"NaN": [0, 1, np.nan], "infinity": [0, 1, np.inf], "None": [0, 1, None],
           "2-D": [[0, 1], [2, 3]], "real": [0, 1, 0.5], "mixed": np.array([0, 1, True], dtype=object)}
    messages = {"NaN": "classes contains a missing class", "None": "classes contains a missing class",
                "infinity": "classes contains NaN or infinity",
                "2-D": r"classes has shape \(2, 2\); expected a 1-D",
                "real": "classes holds continuous values", "mixed": "classes holds labels of mixed types"}
    for kind, classes in bad.items():
        est = _make(cls)
        with pytest.raises(ValueError, match=messages[kind]):
            est.partial_fit(X, y, classes=classes)
        assert not hasattr(est, "classes_"), kind
    fitted = _make(cls).partial_fit(X, y, classes=[0, 1])
    for kind in ("None", "2-D"):
        with pytest.raises(ValueError, match=messages[kind]):
            fitted.partial_fit(X, y, classes=bad[kind])
    assert fitted.n_iter_ == 1
    fitted.partial_fit(X, y, classes=np.array([1, 0]))  # the same classes, in any order
    assert fitted.n_iter_ == 2 and fitted.classes_.tolist() == [0, 1]


@pytest.mark.parametrize("cls", REGRESSORS, ids=lambda c: c.__name__)
def test_regressor_partial_fit_refuses_classes(cls):
    """``reg.partial_fit(X, y, w)`` (scikit-learn's regressors' order) would pass the weights
    as ``classes``: refused, naming ``sample_weight=``, before anything is fitted."""
    X = _X(8)
    y, w = np.r_[np.zeros(4), np.full(4, 10.0)], np.r_[np.ones(4), np.zeros(4)]
    est = _make(cls)
    with pytest.raises(TypeError, match=r"takes no classes .*partial_fit\(X, y, sample_weight=w\)"):
        est.partial_fit(X, y, w)
    with pytest.raises(TypeError, match="takes no classes"):
        est.partial_fit(X, y, classes=[0, 1])
    assert not hasattr(est, "y_mean_")
    assert est.partial_fit(X, y, sample_weight=w).y_mean_.tolist() == [0.0]


def test_regressor_output_width_message_names_the_call():
    """Another number of outputs in a later call names that call: ``partial_fit`` (which the
    estimator was given), or ``warm_start=True``."""
    X, rng = _X(8), np.random.default_rng(0)
    reg = _make(DeepSetsRegressor).partial_fit(X, rng.normal(size=(8, 2)))
    with pytest.raises(ValueError, match=r"y has 1 outputs but the first fit had 2 \(partial_fit\)\."):
        reg.partial_fit(X, rng.normal(size=8))
    warm = _make(DeepSetsRegressor, warm_start=True).fit(X, rng.normal(size=(8, 2)))
    with pytest.raises(ValueError, match=r"first fit had 2 \(warm_start=True\)\."):
        warm.fit(X, rng.normal(size=8))


@pytest.mark.parametrize("cls", [DeepSetsClassifier, DeepSetsRegressor], ids=lambda c: c.__name__)
def test_generator_or_dict_y_is_named(cls):
    """A generator, a dict or a set as ``y`` is named as what it is, not as a scalar."""
    X = _X(8)
    cases = {"a generator": lambda: (i % 2 for i in range(8)), "a dict": lambda: {i: i % 2 for i in range(8)},
             "a set": lambda: set(range(8)), "an iterator": lambda: iter([0, 1] * 4)}
    for what, make_y in cases.items():
        with pytest.raises(ValueError, match=f"y is {what}, not an array of targets"):
            _make(cls).fit(X, make_y())
    with pytest.raises(ValueError, match="y is a scalar"):
        _make(cls).fit(X, 1.0)


def test_nan_or_infinity_in_an_indicator_matrix_is_named():
    """NaN (a missing label) or infinity in a multi-label indicator matrix, dense, sparse or a
    frame, is named in the message."""
    X = _X(8)
    Y = np.array([[0, 1, 1], [1, 0, 1]] * 4, dtype=float)
    Y[2, 1] = np.nan
    for y in (Y, sp.csr_matrix(Y), pd.DataFrame(Y), pd.DataFrame(Y).astype("Int64")):
        with pytest.raises(ValueError, match=r"y has shape \(8, 3\) and contains a missing label \(NaN"):
            _make(DeepSetsClassifier).fit(X, y)
    Y[2, 1] = np.inf
    with pytest.raises(ValueError, match=r"y has shape \(8, 3\) and contains infinity"):
        _make(DeepSetsClassifier).fit(X, Y)
    Y[2, 1] = 2.0  # other values: multi-output targets, as before
    with pytest.raises(ValueError, match="multi-output targets of other values are not supported"):
        _make(DeepSetsClassifier).fit(X, Y)


def test_column_y_warns_once_with_early_stopping():
    """A ``(n, 1)`` y, dense or scipy.sparse, gives one DataConversionWarning, also when a
    validation split reads the training part's labels again."""
    X, y = _X(30), np.array([0, 1, 2] * 10).reshape(-1, 1)
    for yy in (y, sp.csr_matrix(y), sp.csc_array(y)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf = _make(DeepSetsClassifier, early_stopping=True).fit(X, yy)
        assert sum(w.category is DataConversionWarning for w in caught) == 1, type(yy).__name__
        assert clf.classes_.tolist() == [0, 1, 2]
