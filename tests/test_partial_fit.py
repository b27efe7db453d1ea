"""partial_fit of the neural set estimators (scikit-learn's conventions): classes on the first
call, one epoch per call with the optimizer's state kept, n_iter_ counting calls, a call after
fit continuing the model, and a single call equal to fit(max_iter=1)."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from skset.neural_network import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    OTKClassifier,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

SMALL = {
    SetTransformerClassifier: dict(hidden_size=8, n_heads=2, n_layers=1, batch_size=8),
    SetTransformerRegressor: dict(hidden_size=8, n_heads=2, n_layers=1, batch_size=8),
    DeepSetsClassifier: dict(hidden_size=8, batch_size=8),
    DeepSetsRegressor: dict(hidden_size=8, batch_size=8),
    OTKClassifier: dict(n_components=8, n_supports=3, batch_size=8),
    OTKRegressor: dict(n_components=8, n_supports=3, batch_size=8),
}


def _data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=0.7 * (i % 3), size=(int(rng.integers(3, 8)), 2)) for i in range(n)]
    return X, np.arange(n) % 3


def _make(cls, **kw):
    return cls(**SMALL[cls], random_state=0, device="cpu", **kw)


def _y(cls, y):
    return y if "Classifier" in cls.__name__ else y.astype(float) + 0.5


@pytest.mark.parametrize("cls", list(SMALL), ids=lambda c: c.__name__)
def test_one_call_equals_fit_for_one_epoch(cls):
    X, y = _data()
    y = _y(cls, y)
    kw = {"classes": [0, 1, 2]} if "Classifier" in cls.__name__ else {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # partial_fit never warns
        inc = _make(cls).partial_fit(X, y, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # partial_fit holds out nothing: neither does the reference (regressors: "auto" would)
        es = {} if "Classifier" in cls.__name__ else {"early_stopping": False}
        ref = _make(cls, max_iter=1, **es).fit(X, y)
    out = "predict_proba" if "Classifier" in cls.__name__ else "predict"
    np.testing.assert_array_equal(getattr(inc, out)(X), getattr(ref, out)(X))
    assert inc.n_iter_ == 1 and inc.loss_curve_ == ref.loss_curve_


@pytest.mark.parametrize("cls", [SetTransformerClassifier, OTKRegressor],
                         ids=lambda c: c.__name__)
def test_calls_accumulate_epochs_and_optimizer_state(cls):
    X, y = _data(60)
    y = _y(cls, y)
    est = _make(cls)
    chunks = [slice(0, 30), slice(30, 60)]
    for _ in range(3):
        for c in chunks:
            kw = {"classes": [0, 1, 2]} if "Classifier" in cls.__name__ else {}
            est.partial_fit(X[c], y[c], **kw)
    assert est.n_iter_ == 6 and len(est.loss_curve_) == 6
    steps = max(int(v["step"]) for v in est._optimizer_state["state"].values())
    assert steps == 6 * 4  # 30 sets in batches of 8: 4 steps a call, Adam's count carried over
    assert est.loss_curve_[-1] < est.loss_curve_[1]  # the same chunk, calls 2 and 6


def test_classes_rules():
    X, y = _data()
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        _make(DeepSetsClassifier).partial_fit(X, y)
    with pytest.raises(ValueError, match="not in classes"):
        _make(DeepSetsClassifier).partial_fit(X, y, classes=[0, 1])
    # a chunk may miss classes: classes_ come from classes=
    est = _make(DeepSetsClassifier).partial_fit(X[:10], np.where(y[:10] == 2, 0, y[:10]),
                                                classes=[0, 1, 2])
    np.testing.assert_array_equal(est.classes_, [0, 1, 2])
    assert est.predict_proba(X).shape == (len(X), 3)
    est.partial_fit(X, y)  # later calls need no classes
    with pytest.raises(ValueError, match="not seen in the first fit"):
        est.partial_fit(X[:3], np.array([0, 1, 7]))


def test_partial_fit_after_fit_continues_and_clone_starts_afresh():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = _make(DeepSetsClassifier, max_iter=2).fit(X, y)
    weights = {k: v.clone() for k, v in est.module_.state_dict().items()}
    est.partial_fit(X, y)
    assert est.n_iter_ == 3 and len(est.loss_curve_) == 3
    assert any(not np.allclose(v.numpy(), est.module_.state_dict()[k].numpy())
               for k, v in weights.items())
    fresh = clone(est)
    assert not hasattr(fresh, "module_")
    with pytest.raises(ValueError, match="features"):
        est.partial_fit([x[:, :1] for x in X], y)


def test_partial_fit_ignores_early_stopping():
    X, y = _data()
    est = _make(OTKClassifier, early_stopping=True).partial_fit(X, y, classes=[0, 1, 2])
    assert est.validation_scores_ == [] and est.n_iter_ == 1
