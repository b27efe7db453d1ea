"""OTKClassifier's element map starts from the paper's map unless the pipeline's is better by more
than noise (``skset.neural_network._otk_start``)."""

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from skset import OTKClassifier, OTKRegressor
from skset._map_selection import DEFAULT_CHOICE
from skset.datasets import make_motif_order
from skset.neural_network import _otk_start
from skset.neural_network._otk import PAPER_MAP
from skset.neural_network._otk_start import fold_hits, map_choice

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

# window and positions given: the map's preprocessing and bandwidth are what the starts choose;
# epsilon given: its rule scores the start too (tested below with "auto")
SMALL = dict(n_components=8, window=3, n_supports=3, position_sigma=None, max_iter=2,
             epsilon=0.5, device="cpu")


@pytest.fixture(scope="module")
def data():
    X, y = make_motif_order(n_samples=60, min_length=20, max_length=40, motif_length=3,
                            random_state=0)
    return X, y


def _choices(clf, X, y):
    """The map choices of the paper's start and of the pipeline's on the fit's training sets."""
    yi = np.unique(y, return_inverse=True)[1]
    out = []
    for incumbent in (PAPER_MAP, DEFAULT_CHOICE):
        nys = clone(clf.nystrom_)._fit_with_incumbent(X, yi, incumbent=incumbent)
        out.append(map_choice(nys))
    return out


@pytest.mark.parametrize("winner", ["paper", "pipeline", "tie"])
def test_the_start_with_more_hits_by_more_than_noise_is_kept(data, monkeypatch, winner):
    X, y = data
    calls = []

    def hits(parts, y, folds, alpha, sample_weight, masses):
        calls.append(parts)
        first = len(calls) == 1  # the paper's start is scored first
        good = {"paper": first, "pipeline": not first, "tie": True}[winner]
        return np.ones(len(y)) if good else (np.arange(len(y)) % 4 == 0).astype(float)

    monkeypatch.setattr(_otk_start, "fold_hits", hits)
    clf = OTKClassifier(**SMALL, random_state=0).fit(X, y)
    paper, pipeline = _choices(clf, X, y)
    assert paper != pipeline  # the two starts choose different maps on these sets
    assert len(calls) == 2
    expected = "pipeline" if winner == "pipeline" else "paper"
    assert clf.start_scores_["chosen"] == expected
    assert map_choice(clf.nystrom_) == (pipeline if expected == "pipeline" else paper)
    assert clf.start_scores_["paper"] == (1.0 if winner != "pipeline" else 0.25)


def test_keeping_the_papers_start_fits_as_without_the_rule(data, monkeypatch):
    """The other start draws nothing from the generators the fit uses after it."""
    X, y = data
    monkeypatch.setattr(_otk_start, "fold_hits",
                        lambda parts, y, *a: np.ones(len(y)))  # a tie: the paper's
    with_rule = OTKClassifier(**SMALL, random_state=0).fit(X, y)
    assert with_rule.start_scores_["chosen"] == "paper"
    monkeypatch.setattr(OTKClassifier, "_chooses_start", False)
    without = OTKClassifier(**SMALL, random_state=0).fit(X, y)
    assert not hasattr(without, "start_scores_")
    np.testing.assert_array_equal(with_rule.decision_function(X), without.decision_function(X))


def test_fold_hits_match_scikit_learns_logistic_regression(data):
    """Each set's hit is the prediction of a logistic regression fitted on the other folds
    (scikit-learn's with C = 1 / (alpha n))."""
    X, y = data
    clf = OTKClassifier(**SMALL, alpha=0.05, random_state=0)
    clf.fit(X, y)
    feats = clf.nystrom_.transform(X)
    parts = (clf.nystrom_, clf.window_, feats, clf.embedding_)
    yi = np.unique(y, return_inverse=True)[1]
    folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, yi))
    got = fold_hits(parts, yi, folds, 0.05)
    Z = clf.embedding_.transform(feats)
    want = np.zeros(len(y))
    for tr, te in folds:
        lr = LogisticRegression(C=1 / (0.05 * len(tr)), tol=1e-10, max_iter=10_000)
        want[te] = lr.fit(Z[tr], yi[tr]).predict(Z[te]) == yi[te]
    assert got.shape == want.shape and set(np.unique(got)) <= {0.0, 1.0}
    assert (got == want).mean() >= 0.95
    assert 0.5 < got.mean()  # the motif's order is read: better than chance


def test_no_second_start_without_a_choice_to_make(data, monkeypatch):
    """Every map parameter given, multi-label targets, a class of one set, or a regressor: the
    paper's start alone (no second map is fitted)."""
    X, y = data
    monkeypatch.setattr(_otk_start, "fold_hits",
                        lambda *a: pytest.fail("the starts were scored"))
    fixed = dict(standardize=True, normalize=True, keep_norm=True, bandwidth=0.5)
    assert not hasattr(OTKClassifier(**SMALL, **fixed, random_state=0).fit(X, y),
                       "start_scores_")
    Y = np.stack([y, 1 - y], axis=1)
    assert not hasattr(OTKClassifier(**SMALL, random_state=0).fit(X, Y), "start_scores_")
    y1 = np.asarray(y).copy()
    y1[0] = 2  # a class of one set
    assert not hasattr(OTKClassifier(**SMALL, random_state=0).fit(X, y1), "start_scores_")
    reg = OTKRegressor(**SMALL, random_state=0).fit(X, np.asarray(y, dtype=float))
    assert not hasattr(reg, "start_scores_")


def test_a_refit_forgets_the_earlier_scores(data):
    X, y = data
    clf = OTKClassifier(**SMALL, random_state=0).fit(X, y)
    if not hasattr(clf, "start_scores_"):
        clf.start_scores_ = {"stale": True}
    clf.set_params(standardize=True, normalize=True, keep_norm=True, bandwidth=0.5).fit(X, y)
    assert not hasattr(clf, "start_scores_")
    assert torch.is_tensor(clf.module_.center)


@pytest.mark.parametrize("winner", [0.5, 0.1, "tie"])
def test_epsilon_auto_keeps_the_papers_unless_the_pipelines_scores_better(data, monkeypatch, winner):
    """``epsilon="auto"``: the kept start embedded at 0.5 and at 0.1, scored by the starts' test;
    the fit is then exactly the fit with the epsilon it kept given (the other embedding draws
    nothing from the generators the fit uses after it)."""
    X, y = data
    kw = {**SMALL, "epsilon": "auto", "standardize": True, "normalize": True, "keep_norm": True,
          "bandwidth": 0.5}  # the map given: only the epsilon rule scores
    calls = []

    def hits(parts, y, folds, alpha, sample_weight, masses):
        calls.append(parts[3].epsilon)
        good = {0.5: parts[3].epsilon == 0.5, 0.1: parts[3].epsilon == 0.1, "tie": True}[winner]
        return np.ones(len(y)) if good else (np.arange(len(y)) % 4 == 0).astype(float)

    monkeypatch.setattr(_otk_start, "fold_hits", hits)
    clf = OTKClassifier(**kw, random_state=0).fit(X, y)
    assert calls == [0.5, 0.1] and not hasattr(clf, "start_scores_")
    expected = 0.1 if winner == 0.1 else 0.5
    assert clf.epsilon_ == clf.epsilon_scores_["chosen"] == clf.embedding_.epsilon == expected
    assert clf.module_.otk.epsilon == expected
    assert clf.epsilon_scores_["0.5"] == (0.25 if winner == 0.1 else 1.0)
    given = OTKClassifier(**{**kw, "epsilon": expected}, random_state=0).fit(X, y)
    assert not hasattr(given, "epsilon_scores_") and given.epsilon_ == expected
    np.testing.assert_array_equal(clf.decision_function(X), given.decision_function(X))


def test_epsilon_auto_without_a_choice_to_make(data, monkeypatch):
    """Multi-label targets or a class of one set: 0.5, unscored; the regressor takes no "auto"
    (its epsilon stays 0.5)."""
    X, y = data
    monkeypatch.setattr(_otk_start, "fold_hits", lambda *a: pytest.fail("scored"))
    fixed = dict(standardize=True, normalize=True, keep_norm=True, bandwidth=0.5)
    Y = np.stack([y, 1 - y], axis=1)
    multi = OTKClassifier(**{**SMALL, "epsilon": "auto"}, **fixed, random_state=0).fit(X, Y)
    assert multi.epsilon_ == 0.5 and not hasattr(multi, "epsilon_scores_")
    y1 = np.asarray(y).copy()
    y1[0] = 2  # a class of one set
    one = OTKClassifier(**{**SMALL, "epsilon": "auto"}, **fixed, random_state=0).fit(X, y1)
    assert one.epsilon_ == 0.5 and not hasattr(one, "epsilon_scores_")
    assert OTKClassifier().epsilon == "auto" and OTKRegressor().epsilon == 0.5
    with pytest.raises(ValueError, match="epsilon"):
        OTKRegressor(**{**SMALL, "epsilon": "auto"}).fit(X, np.asarray(y, dtype=float))


def test_classifier_alpha_auto_is_scikit_learns_c1_on_the_training_sets(data):
    """``alpha="auto"`` (the default): one over the training sets of positive weight (the
    multinomial ``LogisticRegression()`` penalty of the pipeline's head), the fit of that value
    given explicitly to the last digit; a float is kept as given; a warm start keeps the first
    fit's ``alpha_``."""
    X, y = data
    auto = OTKClassifier(**SMALL, random_state=0).fit(X, y)
    assert auto.alpha == "auto" and auto.alpha_ == 1 / len(X)
    given = OTKClassifier(**SMALL, alpha=1 / len(X), random_state=0).fit(X, y)
    np.testing.assert_array_equal(auto.decision_function(X), given.decision_function(X))
    sw = np.ones(len(X))
    sw[:10] = 0.0
    assert OTKClassifier(**SMALL, random_state=0).fit(X, y, sample_weight=sw).alpha_ == 1 / 50
    assert OTKClassifier(**SMALL, alpha=0.01, random_state=0).fit(X, y).alpha_ == 0.01
    auto.set_params(warm_start=True).fit(X[:30], y[:30])
    assert auto.alpha_ == 1 / len(X)
    with pytest.raises(ValueError, match="alpha"):
        OTKClassifier(alpha="1/n").fit(X, y)


def test_classifier_alpha_given_on_a_warm_start_is_alpha_(data):
    """A warm start after ``set_params(alpha=0.1)`` fits its head with 0.1, and ``alpha_`` says
    so (it kept the first fit's one over the training sets)."""
    X, y = data
    clf = OTKClassifier(**SMALL, warm_start=True, random_state=0).fit(X, y)
    assert clf.alpha_ == 1 / len(X)
    clf.set_params(alpha=0.1).fit(X, y)
    assert clf.alpha_ == 0.1
    # back to "auto": one over this fit's training sets (it kept the explicit 0.1)
    clf.set_params(alpha="auto").fit(X[:40], y[:40])
    assert clf.alpha_ == 1 / 40
    clf.fit(X, y)  # then kept, as a warm start keeps the first fit's
    assert clf.alpha_ == 1 / 40
