"""The regressors' defaults never lose much to predicting the training mean.

The ridge head's penalty is chosen by exact leave-one-out (checked against a naive loop of
scikit-learn ``Ridge`` fits), and ``early_stopping="auto"`` holds out a validation split on small
data, keeps the best epoch and shrinks the output towards the training mean by a factor chosen on
it. On a pure-noise target every default regressor predicts close to the training mean; on a clear
signal each beats it.
"""

import itertools
import math
import warnings

import numpy as np
import pytest
import torch
from sklearn.linear_model import Ridge

from skset import DeepSetsRegressor, OTKRegressor, SetTransformerRegressor
from skset.neural_network._heads import (
    RIDGE_ALPHAS,
    fit_ridge_head,
    ridge_loo_alpha,
    ridge_loo_errors,
)
from skset.neural_network._tasks import validated_shrinkage

REGRESSORS = [OTKRegressor, SetTransformerRegressor, DeepSetsRegressor]
SMALL_KW = {"OTKRegressor": {"n_components": 8, "n_supports": 3}}


def _naive_loo(Z, Y, alphas, w):
    """Leave each row out, fit scikit-learn's Ridge (sum-form penalty alpha * sum(w)) on the
    rest, predict it; the weighted mean of the squared errors summed over outputs."""
    n = len(Z)
    out = []
    for a in alphas:
        err = 0.0
        for i in range(n):
            keep = np.arange(n) != i
            if math.isinf(a):
                pred = np.average(Y[keep], axis=0, weights=w[keep])
            else:
                pred = Ridge(alpha=a * w.sum()).fit(Z[keep], Y[keep],
                                                    sample_weight=w[keep]).predict(Z[i:i + 1])[0]
            err += w[i] * np.sum((Y[i] - pred) ** 2)
        out.append(err / w.sum())
    return np.asarray(out)


@pytest.mark.parametrize("n, d", [(14, 4), (9, 25)])  # primal and dual sides
@pytest.mark.parametrize("weighted", [False, True])
def test_ridge_loo_equals_naive_loop(n, d, weighted):
    rng = np.random.default_rng(n + d)
    Z = rng.normal(size=(n, d))
    Y = Z[:, :2] @ rng.normal(size=(2, 2)) + rng.normal(size=(n, 2))
    w = rng.uniform(0.3, 3.0, size=n) if weighted else np.ones(n)
    alphas = [1e-4, 1e-2, 0.1, 1.0, 10.0, math.inf]
    got = ridge_loo_errors(torch.tensor(Z), torch.tensor(Y), alphas,
                           torch.tensor(w) if weighted else None)
    ref = _naive_loo(Z, Y, alphas, w)
    np.testing.assert_allclose(got, ref, rtol=1e-9)
    chosen = ridge_loo_alpha(torch.tensor(Z), torch.tensor(Y), alphas,
                             torch.tensor(w) if weighted else None, one_se=False)
    assert chosen == alphas[int(np.argmin(ref))]
    # the one-standard-error rule: the largest penalty within one standard error of the paired
    # per-row differences from the best (the naive loop's per-row errors)
    rows = ridge_loo_errors(torch.tensor(Z), torch.tensor(Y), alphas,
                            torch.tensor(w) if weighted else None, per_row=True)
    np.testing.assert_allclose(rows.mean(1), ref, rtol=1e-9)
    best = int(np.argmin(ref))
    se = (rows - rows[best]).std(1, ddof=1) / np.sqrt(n)
    expect = max(a for a, e, s in zip(alphas, ref, se) if e - ref[best] <= s + 1e-9)
    assert ridge_loo_alpha(torch.tensor(Z), torch.tensor(Y), alphas,
                           torch.tensor(w) if weighted else None) == expect


def test_ridge_loo_keeps_the_mean_on_noise_and_not_on_signal():
    # unit-norm rows, as the OTK embedding's; 20 draws each
    rng = np.random.default_rng(0)
    on_noise, on_signal, naive_on_noise = [], [], []
    for _ in range(20):
        Z = rng.normal(size=(40, 30))
        Z /= np.linalg.norm(Z, axis=1, keepdims=True)
        noise = rng.normal(size=(40, 1))
        on_noise.append(ridge_loo_alpha(torch.tensor(Z), torch.tensor(noise)))
        naive_on_noise.append(ridge_loo_alpha(torch.tensor(Z), torch.tensor(noise), one_se=False))
        on_signal.append(ridge_loo_alpha(torch.tensor(Z), torch.tensor(10 * Z[:, :1] + noise)))
    # seed 0: 16 of 20 with the rule, 9 of 20 for the plain minimum
    assert sum(a == math.inf for a in on_noise) >= 15
    assert sum(a == math.inf for a in naive_on_noise) <= 12
    assert all(a < math.inf for a in on_signal)


def test_fit_ridge_head_infinite_penalty_is_the_weighted_mean():
    rng = np.random.default_rng(1)
    Z, Y = torch.tensor(rng.normal(size=(10, 3))), torch.tensor(rng.normal(size=(10, 2)))
    w = torch.tensor(rng.uniform(0.5, 2.0, size=10))
    head = torch.nn.Linear(3, 2, dtype=torch.float64)
    fit_ridge_head(head, Z, Y, math.inf, w)
    assert torch.all(head.weight == 0)
    np.testing.assert_allclose(head.bias.detach().numpy(),
                               np.average(Y.numpy(), axis=0, weights=w.numpy()))
    # a huge finite penalty tends to the same head
    fit_ridge_head(head, Z, Y, 1e12, w)
    np.testing.assert_allclose(head.bias.detach().numpy(),
                               np.average(Y.numpy(), axis=0, weights=w.numpy()), atol=1e-9)
    assert RIDGE_ALPHAS[-1] == math.inf


def test_validated_shrinkage():
    rng = np.random.default_rng(2)
    y = torch.tensor(rng.normal(size=(30, 1)))
    # a prediction that is the target: factor near 1; pure noise: near 0 (never negative)
    assert validated_shrinkage(y, y + 0.01 * torch.tensor(rng.normal(size=(30, 1)))) > 0.99
    anti = validated_shrinkage(-y, y)
    assert anti == 0.0
    noise = torch.tensor(rng.normal(size=(30, 1)))
    assert 0.0 <= validated_shrinkage(noise, y) < 0.3
    # integer weights are copies of the rows in the least-squares factor's numerator and
    # denominator (the noise correction counts rows, so compare its inputs through c_hat = 1)
    out = y + 0.3 * torch.tensor(rng.normal(size=(30, 1)))
    w = torch.tensor(rng.integers(1, 3, size=30)).double()
    rep = torch.repeat_interleave(torch.arange(30), w.long())
    c_w, c_rep = validated_shrinkage(out, y, w), validated_shrinkage(out[rep], y[rep])
    assert abs(c_w - c_rep) < 0.05 and c_w > 0.8


def _problem(signal, n_train=80, n_test=200, seed=0):
    """Sets of 5-15 elements with 3 features; the target is the set's first-feature mean
    (``signal``) or pure noise (``None``)."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=rng.normal(), size=(rng.integers(5, 16), 3))
         for _ in range(n_train + n_test)]
    f = np.array([x[:, 0].mean() for x in X])
    y = rng.normal(size=len(X)) if signal is None else 3.0 * f + 0.1 * rng.normal(size=len(X))
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def _rmse_ratio(est, X, y, Xt, yt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = est.fit(X, y).predict(Xt)
    return np.sqrt(np.mean((pred - yt) ** 2)) / np.sqrt(np.mean((y.mean() - yt) ** 2))


@pytest.mark.parametrize("cls", REGRESSORS)
def test_pure_noise_target_predicts_near_the_training_mean(cls):
    X, y, Xt, yt = _problem(None)
    est = cls(random_state=0, device="cpu")
    assert _rmse_ratio(est, X, y, Xt, yt) <= 1.05
    if cls is OTKRegressor:  # no split by default: the chosen penalty guards it
        assert est.output_shrinkage_ == 1.0 and est.alpha_ >= 1.0
    else:
        assert est.output_shrinkage_ < 1.0  # the validation split was used
    # the same model without the validation split or (OTK) the chosen penalty overfits the noise
    old = dict(early_stopping=False, **({"alpha": 1e-3} if cls is OTKRegressor else {}))
    assert _rmse_ratio(cls(random_state=0, device="cpu", **old), X, y, Xt, yt) > 1.05


@pytest.mark.parametrize("cls", REGRESSORS)
def test_clear_signal_beats_the_mean(cls):
    X, y, Xt, yt = _problem(True)
    est = cls(random_state=0, device="cpu")
    assert _rmse_ratio(est, X, y, Xt, yt) < 0.6
    assert est.output_shrinkage_ > 0.5


def test_otk_regressor_auto_validation_split():
    X, y, Xt, yt = _problem(None)
    est = OTKRegressor(early_stopping="auto", random_state=0, device="cpu")
    assert _rmse_ratio(est, X, y, Xt, yt) <= 1.05
    assert est.validation_scores_ and est.output_shrinkage_ < 1.0


@pytest.mark.parametrize("cls", REGRESSORS)
def test_multi_output_and_zero_weights(cls):
    X, y, Xt, _ = _problem(True, n_train=40, n_test=5)
    Y = np.stack([y, -2.0 * y + 1.0], axis=1)
    kw = dict(random_state=0, device="cpu", max_iter=5, early_stopping="auto")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = cls(**kw).fit(X, Y)
        assert est.predict(Xt).shape == (5, 2)
        assert est.validation_scores_  # 40 sets: "auto" holds out a validation split
        # sets of weight 0 take no part: the same model as without them
        w = np.ones(len(X))
        w[::4] = 0.0
        a = cls(**kw).fit(X, Y, sample_weight=w).predict(Xt)
        keep = w > 0
        b = cls(**kw).fit([x for x, k in zip(X, keep) if k], Y[keep]).predict(Xt)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls", [SetTransformerRegressor, DeepSetsRegressor])
def test_one_shrinkage_factor_per_output(cls):
    """Each output is scaled towards its training mean by its own factor, chosen on its own
    column: a pure-noise column beside a clear one gets a far smaller factor (one factor for
    both scaled the noise by about 0.9), and each column of the predictions is its unshrunk
    column times its factor."""
    import copy

    X, y, Xt, _ = _problem(True)
    noise = np.random.default_rng(7).normal(size=len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = cls(random_state=0, device="cpu").fit(X, np.stack([y, noise], axis=1))
    c = est.output_shrinkage_
    assert c.shape == (2,) and c[0] > 0.9 and c[1] < c[0] - 0.4, c
    raw = copy.deepcopy(est)
    with torch.no_grad():
        for layer, values in zip(raw._shrunk_layers(), raw._unshrunk_output):
            for p, v in zip(layer.parameters(), values):
                p.copy_(v)
    pred, unshrunk = est.predict(Xt), raw.predict(Xt)
    np.testing.assert_allclose(pred - est.y_mean_, c * (unshrunk - est.y_mean_), rtol=1e-4,
                               atol=1e-5)


def test_auto_early_stopping_range():
    X, y, _, _ = _problem(True, n_train=15, n_test=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DeepSetsRegressor(random_state=0, max_iter=3).fit(X, y)
    assert est.validation_scores_ == [] and est.output_shrinkage_ == 1.0  # too few sets
    est = DeepSetsRegressor(random_state=0, max_iter=3, early_stopping=False)
    assert est._validation_split(500) is None
    est.early_stopping = "auto"
    assert est._validation_split(500) == pytest.approx(0.1)
    assert est._validation_split(50) == pytest.approx(0.2)  # at least 10 sets
    assert est._validation_split(1000) is None  # large data: no split by default


def test_otk_regressor_alpha_float_is_kept():
    X, y, _, _ = _problem(True, n_train=30, n_test=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = OTKRegressor(alpha=0.5, early_stopping=False, max_iter=2, random_state=0,
                           device="cpu", n_components=8, n_supports=3).fit(X, y)
    assert est.alpha_ == 0.5
    # a warm start back at "auto" chooses again (it kept the explicit 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.set_params(warm_start=True, alpha="auto").fit(X, y)
    auto = est.alpha_
    assert auto != 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)  # then kept
    assert est.alpha_ == auto


@pytest.mark.parametrize("cls", REGRESSORS)
def test_warm_start_does_not_compound_the_output_shrinkage(cls, monkeypatch):
    # the shrinkage scales the output for prediction only: a warm fit, or partial_fit, trains
    # from the network as training left it. With a factor of 0 (every prediction the training
    # mean) a warm fit that does not move the weights must give back the unshrunk network.
    from skset.neural_network import _tasks

    X, y, Xt, _ = _problem(True, n_train=40, n_test=6)
    kw = dict(random_state=0, device="cpu", dtype="float64", max_iter=3, early_stopping=True,
              warm_start=True)
    if cls is OTKRegressor:  # adam: the alternating solver refits the head in closed form
        kw.update(n_components=8, n_supports=3, solver="adam")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setattr(_tasks, "validated_shrinkage", lambda *a, **k: 0.5)
        est = cls(**kw).fit(X, y)
        assert est.output_shrinkage_ == 0.5
        raw = est.y_mean_[0] + (est.predict(Xt) - est.y_mean_[0]) / 0.5
        assert np.ptp(raw) > 0.1
        est.set_params(max_iter=1, learning_rate_init=1e-300)  # warm fits that train nothing
        monkeypatch.setattr(_tasks, "validated_shrinkage", lambda *a, **k: 0.0)
        est.fit(X, y)
        np.testing.assert_allclose(est.predict(Xt), est.y_mean_[0], rtol=1e-12)
        monkeypatch.setattr(_tasks, "validated_shrinkage", lambda *a, **k: 1.0)
        est.fit(X, y)
        np.testing.assert_allclose(est.predict(Xt), raw, rtol=1e-9)
        # partial_fit (no validation split) trains from the unshrunk network too
        monkeypatch.setattr(_tasks, "validated_shrinkage", lambda *a, **k: 0.5)
        est.fit(X, y)
        est.partial_fit(X, y)
        assert est.output_shrinkage_ == 1.0
        np.testing.assert_allclose(est.predict(Xt), raw, rtol=1e-9)


def _small_regression(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(3, 7)), 2)) for _ in range(n)]
    return X, np.array([s[:, 0].mean() for s in X])


def test_a_warm_fit_that_fails_keeps_the_shrunk_output():
    """A warm fit or ``partial_fit`` that raises before its first step (inputs 1e20 times
    larger: an infinite loss) leaves the predictions of the shrunk network (its output layer
    had been unshrunk in place, so predictions moved by 0.1 while ``output_shrinkage_`` kept
    its factor)."""
    X, y = _small_regression()
    X = [s * 1e-6 for s in X]
    y = y * 1e6 * 1e-6
    big = [s * 1e20 for s in X]
    for how in ("warm_start", "partial_fit"):
        m = DeepSetsRegressor(hidden_size=8, n_layers=1, max_iter=30, early_stopping=True,
                              learning_rate_init=0.02, warm_start=how == "warm_start",
                              random_state=0, device="cpu").fit(X, y)
        before, c = m.predict(X), m.output_shrinkage_
        with pytest.raises((FloatingPointError, ValueError)):
            m.fit(big, y) if how == "warm_start" else m.partial_fit(big, y)
        assert m.output_shrinkage_ == c
        np.testing.assert_array_equal(m.predict(X), before)


def test_shrinkage_targets_and_tiny_weights_edge_cases():
    """One validation set leaves no residual to test the factor with: 0, the training mean (it
    kept the raw least-squares factor); a constant target whose mean is not exact in binary
    (0.1) takes the scale 1, as an exact one does (2.8e-17 before: a later chunk was refused);
    relative weights that float32 rounds to 0 count as 0 (a batch of them gave a NaN loss)."""
    from skset.neural_network._tasks import validated_shrinkage

    assert validated_shrinkage(torch.tensor([[1.0]]), torch.tensor([[0.3]])) == 0.0
    X, y = _small_regression(60)
    for cls in (DeepSetsRegressor, OTKRegressor):
        kw = dict(max_iter=3, random_state=0, device="cpu")
        m = cls(**kw).partial_fit(X[:30], np.full(30, 0.1))
        assert m.y_scale_ == pytest.approx(1.0)
        m.partial_fit(X[30:], y[30:])
        assert np.isfinite(m.predict(X)).all()
        w = np.r_[np.ones(10), np.full(50, 1e-46)]
        est = cls(batch_size=4, **kw).fit(X, y, sample_weight=w)
        ref = cls(batch_size=4, **kw).fit(X, y, sample_weight=np.r_[np.ones(10), np.zeros(50)])
        np.testing.assert_array_equal(est.predict(X), ref.predict(X))


@pytest.mark.parametrize("cls", REGRESSORS)
def test_held_out_sets_take_no_part_in_the_fitted_scalings(cls):
    """With a validation split the elements' standardisation comes from the training part only
    (it read the held-out sets too), while the targets are scaled on every set (the mean a
    shrinkage factor of 0 predicts is every training target's). Targets 2**i name the sets the
    training part holds: the sets whose element offset 10 is left out of ``mean_``."""
    rng = np.random.default_rng(0)
    n = 20
    X = [rng.normal(size=(int(rng.integers(3, 6)), 2)) + 10.0 * (i % 5 == 0) for i in range(n)]
    y = 2.0 ** np.arange(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = cls(early_stopping=True, validation_fraction=0.2, max_iter=2, random_state=0,
                  device="cpu", **SMALL_KW.get(cls.__name__, {})).fit(X, y)
    assert est.y_mean_[0] == pytest.approx(y.mean())
    if not hasattr(est, "scale_"):  # OTKRegressor: no standardisation of the elements
        return
    means = []
    for held in itertools.combinations(range(n), 4):
        train = sorted(set(range(n)) - set(held))
        means.append(np.concatenate([X[i] for i in train]).mean(0))
    every = np.concatenate(X).mean(0)
    assert not np.allclose(est.mean_, every)
    assert min(np.abs(m - est.mean_).max() for m in means) < 1e-9
