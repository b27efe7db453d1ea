"""``batch_size="auto"`` and ``n_iter_no_change="auto"`` of the Set Transformer and Deep Sets:
the rule, and a fit on a few dozen sets of scalars that the rule takes off the class prior."""

import numpy as np
import pytest
import torch
from sklearn.base import clone

from skset import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

CLASSES = [DeepSetsClassifier, DeepSetsRegressor, SetTransformerClassifier,
           SetTransformerRegressor]


@pytest.mark.parametrize("cls", CLASSES)
def test_auto_rule(cls):
    est = cls(batch_size="auto", n_iter_no_change="auto")
    # min(64, ceil(n / 8)): at least 8 steps per epoch
    assert [est._fit_batch_size(n) for n in (1, 8, 9, 67, 512, 513, 5000)] == [
        1, 1, 2, 9, 64, 64, 64]
    # max(10, ceil(160 / ceil(n / batch))): at least 160 steps of patience
    assert est._fit_patience(67, 9) == 20  # 8 steps per epoch
    assert est._fit_patience(67, 64) == 80  # 2 steps per epoch
    assert est._fit_patience(700, 64) == 15  # 11 steps per epoch
    assert est._fit_patience(5000, 64) == 10  # 79 steps per epoch
    # integers are used as given
    fixed = cls(batch_size=5, n_iter_no_change=3)
    assert fixed._fit_batch_size(67) == 5 and fixed._fit_patience(67, 5) == 3
    # defaults: every network's patience is "auto" (the regressors' was 10, and their
    # validation split stopped fits of 1-2 steps an epoch at the training mean)
    assert cls().batch_size == 64
    assert cls().n_iter_no_change == "auto"


@pytest.mark.parametrize("cls", [DeepSetsClassifier, SetTransformerClassifier])
@pytest.mark.parametrize("param", ["batch_size", "n_iter_no_change"])
def test_auto_bad_values(cls, param):
    X = [np.zeros((3, 1)), np.ones((3, 1))]
    with pytest.raises(ValueError, match=param):
        cls(**{param: "Auto"}).fit(X, [0, 1])
    with pytest.raises(ValueError, match=param):
        cls(**{param: 0}).fit(X, [0, 1])


def _scalar_sets(n, seed, size=12):
    """Sets of ``size`` scalars, each set shifted by its own N(0, 1) offset (the mean says
    nothing); class 0 draws N(0, 1) around it, class 1 two modes at +-0.95 (std 0.3)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = []
    for label in y:
        if label:
            x = rng.choice([-1.0, 1.0], size=size) * 0.95 + rng.normal(scale=0.3, size=size)
        else:
            x = rng.normal(size=size)
        X.append((x + rng.normal())[:, None])
    return X, y


def test_auto_learns_small_scalar_sets():
    """67 training sets as ItalyPowerDemand: with 64 sets per batch an epoch is 2 steps and the
    stopping rule ends the fit at the class prior; with ``"auto"`` (9 sets per batch, 20 epochs
    of patience) the same network learns the shape of the sets."""
    X, y = _scalar_sets(67, 0)
    X_test, y_test = _scalar_sets(300, 1)
    base = DeepSetsClassifier(hidden_size=32, max_iter=60, random_state=0)
    plain = clone(base).set_params(n_iter_no_change=10).fit(X, y)
    auto = clone(base).set_params(batch_size="auto", n_iter_no_change="auto").fit(X, y)
    assert plain.n_iter_ < 60  # stopped by the rule on the training loss
    assert abs(plain.score(X_test, y_test) - 0.5) < 0.05  # the class prior
    assert auto.score(X_test, y_test) > 0.6
    # "auto" is exactly the resolved integers
    same = clone(base).set_params(batch_size=9, n_iter_no_change=20).fit(X, y)
    np.testing.assert_allclose(same.predict_proba(X_test), auto.predict_proba(X_test))


def test_default_patience_outlasts_a_noisy_start():
    """DeepSetsClassifier's default patience ("auto": 160 steps, here 80 epochs of 2 steps)
    does not end the fit in the first epochs as 10 epochs of patience do (at the class prior)."""
    X, y = _scalar_sets(67, 0)
    short = DeepSetsClassifier(hidden_size=32, max_iter=60, n_iter_no_change=10,
                               random_state=0).fit(X, y)
    default = DeepSetsClassifier(hidden_size=32, max_iter=60, random_state=0).fit(X, y)
    assert short.n_iter_ < 40
    assert default.n_iter_ == 60
    assert default.loss_curve_[-1] < min(short.loss_curve_)


def test_set_transformer_ends_at_its_lowest_training_loss(monkeypatch):
    """Trained on the training loss (no validation split), the Set Transformer ends with the
    weights of lowest training loss among its last weights and the weights at the start and at
    the end of its epoch of lowest recorded loss: a learning rate far too high makes its loss
    jump around, and the fitted network is the best of those three by the training loss measured
    on each, not the network after its last epoch. With a validation split (the best validation
    weights) and in ``partial_fit`` the checkpoint is not added."""
    from sklearn.metrics import log_loss

    from skset.neural_network._callbacks import LowestLossCheckpoint

    X, y = _scalar_sets(40, 0, size=6)
    kw = dict(hidden_size=16, n_layers=1, n_inducing=None, batch_size=20,
              learning_rate_init=0.2, n_iter_no_change=12, window=1, random_state=0)
    est = SetTransformerClassifier(max_iter=12, **kw).fit(X, y)
    curve = np.asarray(est.loss_curve_)
    best = int(curve.argmin())
    assert 1 <= best < len(curve) - 1 and curve[-1] > curve.min() + 0.05  # a late spike

    # the three candidates, as fits of the same draws stopped there with their last weights
    monkeypatch.setattr(LowestLossCheckpoint, "on_train_end", lambda self, state: None)
    candidates = [SetTransformerClassifier(max_iter=m, **kw).fit(X, y)
                  for m in (len(curve), best + 1, best)]  # last, end and start of the best epoch
    losses = [log_loss(y, c.predict_proba(X)) for c in candidates]
    monkeypatch.undo()
    kept = int(np.argmin(losses))
    assert log_loss(y, est.predict_proba(X)) == pytest.approx(losses[kept], abs=1e-6)
    np.testing.assert_allclose(est.predict_proba(X), candidates[kept].predict_proba(X),
                               atol=1e-6)
    assert losses[kept] < losses[0]  # here not the last weights: the spike is left behind

    class Data:  # what _training_setup reads of a fit's data
        def __init__(self, validation, incremental):
            self.validation, self.incremental = validation, incremental

    def has(est, data):
        return any(isinstance(cb, LowestLossCheckpoint)
                   for cb in est._training_setup(data, False).callbacks)

    st = SetTransformerClassifier()
    assert has(st, Data(None, False))
    assert not has(st, Data(np.arange(3), False)) and not has(st, Data(None, True))
    assert not has(DeepSetsClassifier(), Data(None, False))  # Deep Sets end at their last epoch



def test_lowest_loss_checkpoint_measures_its_candidates():
    """The checkpoint's choice on a scripted training: the weights at the end of the epoch of
    lowest recorded loss can be past a spike of its last step; the training loss measured on
    each candidate decides, the last weights first on a tie."""
    from skset.neural_network._callbacks import LowestLossCheckpoint, TrainingState

    def run(recorded, weights, training_loss):
        module = torch.nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            module.weight.fill_(0.0)  # the start of the first epoch
        state = TrainingState(module=module, optimizer=None)
        state.training_loss = None if training_loss is None else (
            lambda: training_loss(module.weight.detach().item()))
        cb = LowestLossCheckpoint()
        cb.on_train_begin(state)
        for loss, w in zip(recorded, weights, strict=True):
            with torch.no_grad():
                module.weight.fill_(w)
            state.epoch_loss = loss
            cb.on_epoch_end(state)
        cb.on_train_end(state)
        return module.weight.detach().item()

    def around_one(w):
        return (w - 1.0) ** 2

    # epoch 1 records the lowest loss but ends spiked (5.0): its start (1.0) is kept
    assert run([0.5, 0.2, 0.6], [1.0, 5.0, 2.0], around_one) == 1.0
    # without a measure: the end of that epoch, as the loss recorded says
    assert run([0.5, 0.2, 0.6], [1.0, 5.0, 2.0], None) == 5.0
    # a fit that only improves ends with its last weights
    assert run([0.5, 0.4, 0.3], [0.5, 0.8, 1.0], around_one) == 1.0
    # a tie between the last weights and a candidate: the last weights
    assert run([0.5, 0.2, 0.6], [3.0, 1.5, 0.5], around_one) == 0.5

def test_deep_sets_scaled_mean_is_the_sum_on_sets_of_one_size():
    # pooling="scaled_mean" scales the mean by the training sets' mean size: on sets all of one
    # size the fit is that of pooling="sum" to the last bit; on sets of several
    # sizes pool_size_ is their mean size, and a set's output does not grow with its size
    rng = np.random.default_rng(0)
    y = np.arange(24) % 2
    X = [rng.normal(loc=0.5 * c, size=(6, 3)) for c in y]
    kw = dict(hidden_size=8, max_iter=5, random_state=0, window=1)
    a = DeepSetsClassifier(pooling="scaled_mean", **kw).fit(X, y)
    b = DeepSetsClassifier(pooling="sum", **kw).fit(X, y)
    assert a.pool_size_ == 6.0 and b.pool_size_ is None
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.loss_curve_ == b.loss_curve_
    V = [rng.normal(size=(n, 3)) for n in rng.integers(2, 30, size=24)]
    c = DeepSetsRegressor(pooling="scaled_mean", early_stopping=False, **kw).fit(
        V, rng.normal(size=24))
    assert c.pool_size_ == np.mean([len(v) for v in V])
    twice = [np.vstack([v, v]) for v in V]  # each set's elements repeated: the same mean
    np.testing.assert_allclose(c.predict(twice), c.predict(V), rtol=1e-5, atol=1e-6)
    # a set of sample_weight k counts k times in pool_size_, as k copies of it would
    w = rng.integers(0, 4, size=24)
    t = rng.normal(size=24)
    weighted = DeepSetsRegressor(pooling="scaled_mean", early_stopping=False, **kw).fit(
        V, t, sample_weight=w)
    copies = [v for v, k in zip(V, w) for _ in range(k)]
    assert weighted.pool_size_ == pytest.approx(np.mean([len(v) for v in copies]), rel=1e-6)
    with pytest.raises(ValueError, match="pooling"):
        DeepSetsClassifier(pooling="median").fit(X, y)


def test_deep_sets_sized_mean_is_the_sum_on_sets_of_one_size_and_reads_sizes():
    # pooling="sized_mean", the default: the scaled mean and log(n / pool_size_) through a vector that
    # starts at zero: on sets all of one size the fit of pooling="sum" to the last bit
    rng = np.random.default_rng(1)
    y = np.arange(24) % 2
    X = [rng.normal(loc=0.5 * c, size=(5, 3)) for c in y]
    kw = dict(hidden_size=8, max_iter=5, random_state=0, window=1)
    a = DeepSetsClassifier(**kw).fit(X, y)
    b = DeepSetsClassifier(pooling="sum", **kw).fit(X, y)
    assert a.pooling == "sized_mean" and a.pool_size_ == 5.0
    assert not a.module_.size_weight.detach().any()
    # float weights in float64: still exactly the size (a weighted mean can round off it), and
    # the network's buffer holds pool_size_ itself, with or without the pooled skip
    w = rng.random(24)
    for skip in (False, True):
        f = DeepSetsClassifier(dtype="float64", pooled_skip=skip, **kw).fit(X, y, sample_weight=w)
        assert f.pool_size_ == 5.0 and not f.module_.size_weight.detach().any()
        g = DeepSetsClassifier(dtype="float64", pooled_skip=skip, **kw).fit(X[:2] + [X[2][:4]],
                                                                            y[:3])
        assert g.module_.pool_size.item() == g.pool_size_ == 14 / 3  # not a float32 number
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.loss_curve_ == b.loss_curve_
    # a count target: the sized mean learns that a set of its elements twice is larger; the
    # scaled mean cannot tell the two apart
    V = [rng.uniform(size=(n, 2)) for n in rng.integers(1, 21, size=200)]
    count = np.array([len(v) for v in V], dtype=float)
    twice = [np.vstack([v, v]) for v in V]
    kw = dict(hidden_size=16, max_iter=60, random_state=0, window=1, early_stopping=False,
              batch_size=32)
    sized = DeepSetsRegressor(pooling="sized_mean", **kw).fit(V, count)
    scaled = DeepSetsRegressor(pooling="scaled_mean", **kw).fit(V, count)
    assert np.mean(sized.predict(twice) - sized.predict(V)) > 2.0
    np.testing.assert_allclose(scaled.predict(twice), scaled.predict(V), rtol=1e-5, atol=1e-4)
    assert np.sqrt(np.mean((sized.predict(V) - count) ** 2)) < 0.75 * np.sqrt(
        np.mean((scaled.predict(V) - count) ** 2))
