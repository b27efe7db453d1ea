"""The set networks' pooled skip (``pooled_skip=True``): a linear model of the mean and max of the
raw elements, fitted first as the raw-pooling baseline, added to the network's output."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skset import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)
from skset.neural_network._heads import ridge_loo_alpha
from skset.nn import PooledLinear

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

# no training step moves the network: the fitted model is its starting point
UNTRAINED = dict(max_iter=1, learning_rate_init=1e-12, random_state=0, dtype="float64",
                 device="cpu")


def _sets(n=90, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    # features of very different scales and offsets: the standardisations must match
    X = [rng.normal(loc=i % n_classes * 0.3, size=(int(rng.integers(3, 9)), 2)) * [1, 50] + [0, 7]
         for i in range(n)]
    return X, np.arange(n) % n_classes


def _pooled(X):
    return np.array([np.r_[s.mean(0), s.max(0)] for s in X])


@pytest.mark.parametrize("cls", [DeepSetsClassifier, SetTransformerClassifier])
def test_untrained_classifier_is_scikit_learns_logistic_regression(cls):
    X, y = _sets()
    ref = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000))
    ref.fit(_pooled(X), y)
    est = cls(pooled_skip=True, **UNTRAINED).fit(X, y)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(_pooled(X)), atol=2e-4)
    # without the skip the untrained network is far from it
    plain = cls(pooled_skip=False, **UNTRAINED).fit(X, y)
    assert np.abs(plain.predict_proba(X) - ref.predict_proba(_pooled(X))).max() > 0.05


@pytest.mark.parametrize("cls", [DeepSetsRegressor, SetTransformerRegressor])
def test_untrained_regressor_is_ridge_on_the_pooled_features(cls):
    X, _ = _sets()
    F = _pooled(X)
    rng = np.random.default_rng(1)
    y = F @ [1.0, 0.02, -1.0, 0.01] + rng.normal(size=len(X))
    Fs = StandardScaler().fit_transform(F)
    ys = (y - y.mean()) / y.std()
    alpha = ridge_loo_alpha(torch.as_tensor(Fs), torch.as_tensor(ys))  # the penalty per set
    ref = Ridge(alpha=alpha * len(X)).fit(Fs, y)
    est = cls(pooled_skip=True, early_stopping=False, **UNTRAINED).fit(X, y)
    np.testing.assert_allclose(est.predict(X), ref.predict(Fs), rtol=1e-6, atol=1e-6)


def test_multilabel_skip_is_one_logistic_regression_per_label():
    X, y = _sets()
    Y = np.stack([y == 0, y == 2], axis=1).astype(int)
    est = DeepSetsClassifier(pooled_skip=True, **UNTRAINED).fit(X, Y)
    F = StandardScaler().fit_transform(_pooled(X))
    for label in range(2):
        ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(F, Y[:, label])
        np.testing.assert_allclose(est.predict_proba(X)[:, label], ref.predict_proba(F)[:, 1],
                                   atol=2e-4)


def test_pooled_linear_ignores_padding_and_order():
    torch.manual_seed(0)
    skip = PooledLinear(3, 2).double()
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    mask = torch.arange(6) < torch.tensor([[6], [4]])
    out = skip(x, mask)
    noisy = x.clone()
    noisy[1, 4:] = 1e6  # padding holds anything
    perm = torch.cat([x[:1, torch.tensor([5, 2, 0, 1, 4, 3])], x[1:]])
    torch.testing.assert_close(skip(noisy, mask), out)
    torch.testing.assert_close(skip(perm, mask), out)
    # the naive loop: mean and max of each set's real elements
    for b, n in enumerate((6, 4)):
        z = torch.cat([x[b, :n].mean(0), x[b, :n].amax(0)])
        torch.testing.assert_close(out[b], skip.linear(z))


def test_training_starts_from_the_baseline_and_lowers_its_loss():
    from sklearn.metrics import log_loss

    X, y = _sets(n=120, seed=3)
    base = DeepSetsClassifier(pooled_skip=True, **UNTRAINED).fit(X, y)
    trained = DeepSetsClassifier(pooled_skip=True, max_iter=30, random_state=0,
                                 device="cpu", dtype="float64").fit(X, y)
    start, end = log_loss(y, base.predict_proba(X)), log_loss(y, trained.predict_proba(X))
    assert end < start - 0.01


def test_regressor_output_shrinkage_scales_the_skip_too(monkeypatch):
    # the validated shrinkage multiplies the whole output (network and skip): with a factor of
    # 0 every prediction is the training mean
    from skset.neural_network import _tasks

    monkeypatch.setattr(_tasks, "validated_shrinkage", lambda *a, **k: 0.0)
    X, _ = _sets(n=200, seed=4)
    y = _pooled(X) @ [1.0, 0.02, -1.0, 0.01] + 10.0
    est = DeepSetsRegressor(pooled_skip=True, max_iter=2, early_stopping=True, random_state=0,
                            device="cpu", dtype="float64").fit(X, y)
    assert est.output_shrinkage_ == 0.0
    np.testing.assert_allclose(est.predict(X), est.y_mean_[0], rtol=1e-12)


def test_option_is_a_parameter_clone_pickle_and_old_models():
    X, y = _sets()
    est = DeepSetsClassifier(pooled_skip=True, max_iter=2, random_state=0, device="cpu")
    assert clone(est).get_params()["pooled_skip"] is True
    est.fit(X, y)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict_proba(X), est.predict_proba(X))
    # a model saved before the option: no parameter, no module_.skip attribute
    old = DeepSetsClassifier(pooled_skip=False, max_iter=2, random_state=0, device="cpu")
    old.fit(X, y)
    expected = old.predict_proba(X)
    state = dict(old.__getstate__())
    state.pop("pooled_skip")
    state.pop("pooled_skip_")
    del old.module_.skip
    state["module_"] = old.module_
    legacy = DeepSetsClassifier.__new__(DeepSetsClassifier)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        legacy.__setstate__(state)
    assert legacy.pooled_skip is False
    np.testing.assert_array_equal(legacy.predict_proba(X), expected)


def test_defaults_have_no_skip_and_the_fitted_choice_is_kept():
    X, y = _sets()
    kw = dict(max_iter=1, random_state=0, device="cpu")
    for est in (DeepSetsClassifier(**kw), SetTransformerClassifier(hidden_size=8, n_heads=2, **kw)):
        est.fit(X, y)
        assert est.pooled_skip_ is False and est.module_.skip is None
    reg = DeepSetsRegressor(pooled_skip=True, **kw).fit(X, y.astype(float))
    assert reg.pooled_skip_ is True and reg.module_.skip is not None
    # warm_start continues the fitted network: a pooled_skip changed since is refused, by name
    with pytest.raises(ValueError, match=r"pooled_skip=False \(fitted with True\)"):
        reg.set_params(pooled_skip=False, warm_start=True).fit(X, y.astype(float))
    reg.set_params(pooled_skip=True).fit(X, y.astype(float))
    assert reg.module_.skip is not None and reg.pooled_skip_ is True


def test_skset_save_and_load_keep_the_skip(tmp_path):
    import skset

    X, y = _sets()
    est = DeepSetsClassifier(pooled_skip=True, max_iter=2, random_state=0, device="cpu")
    est.fit(X, y)
    skset.save(est, tmp_path / "ds.skset")
    loaded = skset.load(tmp_path / "ds.skset")
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
