"""What a later fit (``warm_start=True``, ``partial_fit``) and a split for early stopping read:
parameters set since the fit take effect in every solver's path, a warm start keeps every class,
the held-out sets stay out of the class weights, and the class weights' scale is immaterial.
Each test failed before its fix."""

import copy
import warnings

import numpy as np
import pytest

from skset import DeepSetsClassifier, DeepSetsRegressor, OTKClassifier, OTKRegressor
from skset._torch import random_streams
from skset.neural_network._training import split_validation

SMALL = {"n_components": 4, "n_supports": 2, "device": "cpu", "random_state": 0}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _sets(n, seed=0, spread=0.0, classes=1):
    rng = np.random.default_rng(seed)
    return [rng.normal(loc=spread * (i % classes), size=(int(rng.integers(4, 8)), 2))
            for i in range(n)]


@pytest.mark.parametrize("solver, how", [("adam", "warm_start"), ("adam", "partial_fit"),
                                         ("alternating", "partial_fit")])
def test_regressor_alpha_set_since_the_fit_is_used(solver, how):
    """``set_params(alpha=1e5)`` then a warm start or ``partial_fit``: the Adam penalty and
    ``alpha_`` read 1e5 and the head shrinks (they kept the previous fit's 1e-3)."""
    X = _sets(24)
    y = np.array([s[:, 0].mean() for s in X])
    reg = OTKRegressor(**SMALL, solver=solver, alpha=1e-3, max_iter=2,
                       warm_start=how == "warm_start").fit(X, y)
    reg.set_params(alpha=1e5)
    w0 = float(reg.module_.head.weight.norm())
    for _ in range(3):
        reg.fit(X, y) if how == "warm_start" else reg.partial_fit(X, y)
    assert reg.alpha_ == 1e5
    assert float(reg.module_.head.weight.norm()) < 0.95 * w0


@pytest.mark.parametrize("solver, how", [("alternating", "partial_fit"), ("adam", "warm_start")])
def test_classifier_back_to_auto_is_chosen_again_in_every_path(solver, how):
    X, y = _sets(24, spread=2.0, classes=2), np.arange(24) % 2
    clf = OTKClassifier(**SMALL, solver=solver, max_iter=1,
                        warm_start=how == "warm_start").fit(X, y)
    assert clf.alpha_ == 1 / 24
    clf.set_params(alpha=50.0)
    clf.fit(X, y) if how == "warm_start" else clf.partial_fit(X, y)
    assert clf.alpha_ == 50.0
    clf.set_params(alpha="auto")
    clf.fit(X[:12], y[:12]) if how == "warm_start" else clf.partial_fit(X[:12], y[:12])
    assert clf.alpha_ == 1 / 12


@pytest.mark.parametrize("cls", [OTKClassifier, DeepSetsClassifier])
def test_warm_start_without_a_fitted_class_is_refused_and_changes_nothing(cls):
    """As scikit-learn's ``MLPClassifier``: a warm start's ``y`` holds every fitted class (the
    OTK head's row of the missing class was zeroed, its test accuracy 1.0 -> 0.0);
    ``partial_fit`` still takes chunks of some classes."""
    X, y = _sets(30, spread=3.0, classes=3), np.arange(30) % 3
    kw = SMALL if cls is OTKClassifier else {"hidden_size": 8, "device": "cpu", "random_state": 0}
    clf = cls(**kw, max_iter=2, warm_start=True).fit(X, y)
    P = clf.predict_proba(X)
    keep = y != 2
    with pytest.raises(ValueError, match=r"every class of the first fit; classes \[2\]"):
        clf.fit([x for x, k in zip(X, keep) if k], y[keep])
    np.testing.assert_array_equal(clf.predict_proba(X), P)
    clf.partial_fit([x for x, k in zip(X, keep) if k], y[keep])


def test_a_class_of_weight_zero_keeps_a_near_zero_probability():
    """A plain fit where every set of a class weighs 0: the class keeps a near-zero probability
    (the level start of a ``partial_fit`` chunk's absent classes gave it 0.10-0.19 of 3)."""
    X, y = _sets(30, spread=2.0, classes=3), np.arange(30) % 3
    for solver in ("alternating", "adam"):
        clf = OTKClassifier(**SMALL, max_iter=2, solver=solver).fit(
            X, y, sample_weight=(y != 2).astype(float))
        assert clf.predict_proba(X)[:, 2].max() < 0.01


def test_optimizer_changed_on_a_warm_start_is_the_one_that_trains():
    """``adamw`` then ``set_params(optimizer="adam")`` and a warm fit: Adam's coupled decay
    (torch's Adam took AdamW's decoupled decay from the saved state: the same fit as AdamW)."""
    X = _sets(16)
    y = np.array([s[:, 0].sum() for s in X])
    base = DeepSetsRegressor(hidden_size=8, optimizer="adamw", alpha=5.0, learning_rate_init=0.05,
                             max_iter=2, early_stopping=False, warm_start=True, random_state=0,
                             device="cpu").fit(X, y)
    out = {}
    for opt in ("adamw", "adam"):
        est = copy.deepcopy(base).set_params(optimizer=opt).fit(X, y)
        out[opt] = est.predict(X)
        assert est._optimizer_state["param_groups"][0]["decoupled_weight_decay"] == (opt == "adamw")
    assert not np.allclose(out["adam"], out["adamw"])


@pytest.mark.parametrize("cls", [OTKClassifier, DeepSetsClassifier])
def test_balanced_class_weights_count_the_training_part(cls):
    y = np.array([0] * 7 + [1] * 3)
    X = [np.random.default_rng(i).normal(loc=c, size=(4, 2)) for i, c in enumerate(y)]
    tr, _ = split_validation(10, 0.5, y=y, stratify=True, seed=random_streams(0)[0])
    counts = np.bincount(y[tr], minlength=2)
    kw = SMALL if cls is OTKClassifier else {"hidden_size": 4, "device": "cpu", "random_state": 0}
    est = cls(**kw, max_iter=1, class_weight="balanced", early_stopping=True,
              validation_fraction=0.5).fit(X, y)
    np.testing.assert_allclose(est.class_weight_, len(tr) / (2 * counts))


@pytest.mark.parametrize("cls", [OTKClassifier, DeepSetsClassifier])
@pytest.mark.parametrize("scale", [1e-50, 1e39])
def test_uniform_class_weights_of_any_scale_are_no_class_weights(cls, scale):
    """Only the ratios of single-label class weights count (the losses are weighted means):
    1e-50 or 1e39 for every class is the fit without them (float32 made them 0 or inf, a NaN
    loss)."""
    X, y = _sets(20, spread=1.0, classes=2), np.arange(20) % 2
    kw = SMALL if cls is OTKClassifier else {"hidden_size": 4, "device": "cpu", "random_state": 0}
    plain = cls(**kw, max_iter=2).fit(X, y).predict_proba(X)
    weighted = cls(**kw, max_iter=2, class_weight={0: scale, 1: scale}).fit(X, y)
    assert list(weighted.class_weight_) == [scale, scale]
    np.testing.assert_allclose(weighted.predict_proba(X), plain, atol=1e-6)


def test_multilabel_partial_fit_refuses_other_classes_later():
    X = _sets(12)
    Y = np.column_stack([np.arange(12) % 2, np.arange(12) % 3 == 0]).astype(int)
    clf = DeepSetsClassifier(hidden_size=4, random_state=0, device="cpu").partial_fit(X, Y)
    with pytest.raises(ValueError, match="not the fitted classes_"):
        clf.partial_fit(X, Y, classes=["x", "y", "z"])
    clf.partial_fit(X, Y, classes=[0, 1])
    assert clf.n_iter_ == 2
