"""skset.datasets.load_japanese_vowels follows scikit-learn's loaders: ``return_X_y=True`` gives
``(X, y)``, the official split is ``subset="train"`` / ``subset="test"``."""

import numpy as np
import pytest
from sklearn.utils import Bunch

from skset.datasets import load_japanese_vowels


def test_return_X_y_gives_two_values():
    out = load_japanese_vowels(return_X_y=True)
    assert isinstance(out, tuple) and len(out) == 2
    X, y = out
    assert len(X) == len(y) == 270  # the default subset is the training set
    assert all(x.dtype == np.float64 and x.ndim == 2 and x.shape[1] == 12 for x in X)
    assert y.dtype == np.int64 and set(y.tolist()) == set(range(1, 10))


@pytest.mark.parametrize("subset, n", [("train", 270), ("test", 370), ("all", 640)])
def test_subsets(subset, n):
    X, y = load_japanese_vowels(subset=subset, return_X_y=True)
    assert len(X) == len(y) == n
    assert 7 <= min(len(x) for x in X) and max(len(x) for x in X) <= 29


def test_all_is_train_then_test():
    X_tr, y_tr = load_japanese_vowels(subset="train", return_X_y=True)
    X_te, y_te = load_japanese_vowels(subset="test", return_X_y=True)
    X, y = load_japanese_vowels(subset="all", return_X_y=True)
    np.testing.assert_array_equal(y, np.concatenate([y_tr, y_te]))
    for a, b in zip(X, X_tr + X_te):
        np.testing.assert_array_equal(a, b)
    assert np.bincount(y_tr).tolist() == [0] + [30] * 9


def test_bunch():
    data = load_japanese_vowels(subset="test")
    assert isinstance(data, Bunch)
    assert set(data) == {"data", "target", "feature_names", "DESCR"}
    assert len(data.data) == len(data.target) == 370 and len(data.feature_names) == 12
    assert "Japanese Vowels" in data.DESCR


def test_bad_subset():
    with pytest.raises(ValueError, match="subset must be 'train', 'test' or 'all'"):
        load_japanese_vowels(subset="validation")
