"""A binary classifier's ``decision_function`` is scikit-learn's ``(n_sets,)``, the score of
``classes_[1]``: the scorers, calibration and one-vs-rest that read it work on every set
classifier (they broke on ``(n_sets, 2)``), and it ranks the sets as ``predict_proba[:, 1]``."""

import numpy as np
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.metrics import get_scorer, roc_auc_score
from sklearn.model_selection import cross_val_score
from sklearn.multiclass import OneVsRestClassifier

from skset import DeepSetsClassifier, OTKClassifier, SetTransformerClassifier

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SMALL = {
    "otk": lambda: OTKClassifier(n_components=6, n_supports=3, max_iter=3, random_state=0),
    "st": lambda: SetTransformerClassifier(hidden_size=8, n_heads=2, n_inducing=None, max_iter=5,
                                           random_state=0),
    "ds": lambda: DeepSetsClassifier(hidden_size=8, max_iter=5, random_state=0),
}


def _data(n=40, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    X = [rng.normal(loc=0.8 * c, size=(int(rng.integers(3, 8)), 3)) for c in y]
    return X, np.array(["no", "yes", "maybe"])[y]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_binary_decision_function_is_the_second_class_score(name):
    X, y = _data()
    clf = SMALL[name]().fit(X, y)
    dec, proba = clf.decision_function(X), clf.predict_proba(X)
    assert dec.shape == (len(X),)
    # the logit of classes_[1] minus that of classes_[0]: the log-odds of the second class
    np.testing.assert_allclose(dec, np.log(proba[:, 1]) - np.log(proba[:, 0]), rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(dec > 0).astype(int)])
    target = y == clf.classes_[1]
    assert get_scorer("roc_auc")(clf, X, y) == pytest.approx(roc_auc_score(target, dec))
    assert np.all(np.isfinite(cross_val_score(SMALL[name](), X, y, cv=2, scoring="roc_auc")))
    calibrated = CalibratedClassifierCV(SMALL[name](), cv=2).fit(X, y)
    assert calibrated.predict_proba(X).shape == (len(X), 2)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_multiclass_keeps_one_column_per_class_and_one_vs_rest_works(name):
    X, y = _data(45, 3)
    clf = SMALL[name]().fit(X, y)
    assert clf.decision_function(X).shape == (len(X), 3)
    ovr = OneVsRestClassifier(SMALL[name]()).fit(X, y)
    assert ovr.decision_function(X).shape == (len(X), 3)
