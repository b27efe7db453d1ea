"""Sets of very different scales: the set networks' ``standardize="auto"`` standardises each set
by its own mean and deviation when the training sets' deviations lie far apart, at fit, predict
and in the exported module alike, and leaves sets of one scale as ``standardize=True`` reads
them."""

import numpy as np
import pytest
import torch

import skset
from skset._sets import pack
from skset.export import serving_module
from skset.neural_network import DeepSetsClassifier, DeepSetsRegressor, SetTransformerClassifier
from skset.neural_network._set_scale import (
    SET_SCALE_SPREAD,
    scale_floor,
    scale_spread,
    set_standardized,
    set_standardized_tensor,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _waves(n, rng, spread=5.0):
    """Series of 30-60 steps: class 0 a sine, class 1 a square wave (same period), each at an
    amplitude drawn over ``spread`` decades, plus noise of 1% of it; one channel."""
    y = np.arange(n) % 2
    X = []
    for c in y:
        t = np.arange(int(rng.integers(30, 61)))
        amp = 10.0 ** rng.uniform(-spread / 2, spread / 2)
        wave = np.sin(2 * np.pi * t / 12 + rng.uniform(0, 6.3))
        wave = np.sign(wave) if c else wave
        X.append((amp * (wave + 0.01 * rng.normal(size=len(t))))[:, None])
    return X, y


def test_numpy_and_torch_agree_with_a_loop():
    """Each set less its mean over its deviation, per feature (population deviation; a constant
    feature 0), and its summary, the mean and the log of the deviation floored at the floor; the
    padded tensor version the same, padding 0 whatever it held, in float32 down to a scale of
    1e-30 (squares of deviations underflowed there); the floor the smallest positive deviation."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 3)) * 10.0 ** rng.integers(-4, 4) + 5 for n in (1, 2, 7, 40)]
    X[2][:, 1] = 3.25  # constant feature
    X.append(rng.normal(size=(9, 3)) * 1e-30)
    floor = scale_floor(X)
    sds = [np.where(x.std(0) > 1e-6 * np.abs(x).max(0), x.std(0), np.inf) for x in X]
    np.testing.assert_allclose(floor, np.min(sds, axis=0), rtol=1e-10)
    shapes, summary = set_standardized(X, floor)
    for i, (x, o) in enumerate(zip(X, shapes, strict=True)):
        sd = x.std(0)
        const = ~(sd > 1e-6 * np.abs(x).max(0))
        ref = np.where(const, 0.0, (x - x.mean(0)) / np.where(const, 1, sd))
        np.testing.assert_allclose(o, ref, rtol=1e-10, atol=1e-12)
        assert o.dtype == x.dtype and o.shape == x.shape
        np.testing.assert_allclose(summary[i], np.r_[x.mean(0), np.log(np.maximum(np.where(const, 0, sd),
                                                                                  floor))], rtol=1e-10)
    assert np.all(shapes[0] == 0) and np.all(shapes[2][:, 1] == 0)
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 2e-5)):
        xb, mb = pack(X, dtype=dtype)
        xb = torch.where(mb[..., None], xb, torch.tensor(1e6, dtype=dtype))  # garbage pads
        tb, ts = set_standardized_tensor(xb, mb, torch.as_tensor(floor))
        for i, o in enumerate(shapes):
            # float32 reads a set far from 0 against its spread (5 against 1e-4) to its rounding
            far = dtype == torch.float32 and np.abs(X[i].mean(0) / X[i].std(0)).max() > 100
            np.testing.assert_allclose(tb[i, : len(o)].double().numpy(), o, rtol=tol,
                                       atol=1e-2 if far else tol)
            assert torch.all(tb[i, len(o):] == 0)
        np.testing.assert_allclose(ts[:, 0].double().numpy(), summary, rtol=tol,
                                   atol=1e-2 if dtype == torch.float32 else 1e-36)


def test_spread_reads_the_sets_deviations():
    rng = np.random.default_rng(1)
    same = [rng.normal(size=(20, 2)) for _ in range(30)]
    assert scale_spread(same) < 3
    far, _ = _waves(40, rng)
    assert scale_spread(far) > SET_SCALE_SPREAD
    assert scale_spread(far[:9]) == 1.0  # too few sets to read a spread from
    # sets of one repeated row have no scale (their rounding-level deviation read 1e-17: the
    # spread of 30 unit sets went from 1.7 to 1.8e16 with five of them)
    repeated = [np.repeat(rng.normal(size=(1, 2)), 6, axis=0) for _ in range(5)]
    assert scale_spread(same + repeated) < 3
    w = np.ones(40)
    w[np.argsort([np.std(x) for x in far])[:20]] = 0  # the small half weighs nothing
    assert scale_spread(far, w) < scale_spread(far)


@pytest.mark.parametrize("cls", [DeepSetsClassifier, SetTransformerClassifier])
def test_auto_reads_series_of_far_apart_scales(cls):
    """Sine against square waves at amplitudes over five decades: ``"auto"`` standardises each
    series by its own scale and separates them; ``True`` (one standardisation over all elements)
    leaves most series near zero and scores lower on the same test series."""
    rng = np.random.default_rng(2)
    X, y = _waves(120, rng)
    Xt, yt = _waves(200, rng)
    kw = dict(random_state=0, max_iter=30, window=5, dilation=1,
              **({"hidden_size": 16, "n_heads": 2, "n_layers": 1} if cls is SetTransformerClassifier
                 else {"hidden_size": 16}))
    auto = cls(**kw).fit(X, y)
    plain = cls(standardize=True, **kw).fit(X, y)
    assert auto.set_standardized_ and not plain.set_standardized_
    assert auto.score(Xt, yt) >= 0.8
    assert auto.score(Xt, yt) > plain.score(Xt, yt) + 0.2  # 0.88 and 0.965 against 0.585 and 0.64
    # a set reads the same alone, in a batch, scaled by any factor (its own scale is not read)
    p = auto.predict_proba(Xt)
    np.testing.assert_allclose(auto.predict_proba([Xt[3]])[0], p[3], rtol=1e-5, atol=1e-6)
    assert auto._in_features == 5 + 1 + 2  # the shape's k-mers, then the mean and log scale


def test_sets_of_one_scale_read_as_before():
    """Sets of one scale: ``"auto"`` fits the model ``True`` fits, to the bit."""
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(int(rng.integers(3, 12)), 2)) for _ in range(40)]
    y = np.array([x[:, 0].mean() for x in X])
    a = DeepSetsRegressor(random_state=0, max_iter=3, hidden_size=8).fit(X, y)
    b = DeepSetsRegressor(random_state=0, max_iter=3, hidden_size=8, standardize=True).fit(X, y)
    assert not a.set_standardized_
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


@pytest.mark.parametrize("params", [dict(window=3), dict(window=1, pooled_skip=True)])
def test_served_module_standardises_each_set(tmp_path, params):
    """The served module of a model that reads each set by its own scale gives its
    ``predict_proba`` on every set in a padded batch, padding garbage included, as the set alone
    and with its rows reversed (window 1) (the k-mers of the constant log-scale column, then the
    pooled skip's mean of the shapes, were rounding noise scaled to unit size: 11 of 60 sets 0.45
    apart, batch and order changing outputs by 0.6); ``skset.save`` / ``load`` keep the floor;
    a model fitted before the attribute existed has no per-set front."""
    rng = np.random.default_rng(4)
    X, y = _waves(60, rng)
    est = DeepSetsClassifier(random_state=0, max_iter=3, hidden_size=8, **params).fit(X, y)
    assert est.set_standardized_
    module = serving_module(est)
    xb, mb = pack(X, dtype=torch.float32)
    xb = torch.where(mb[..., None], xb, torch.tensor(3e4))
    with torch.no_grad():
        proba = module(xb, mb)[1].numpy()
    expected = est.predict_proba(X)
    np.testing.assert_allclose(proba, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(est.predict_proba([X[5]])[0], expected[5], rtol=1e-5, atol=1e-6)
    if params["window"] == 1:
        np.testing.assert_allclose(est.predict_proba([X[5][::-1]])[0], expected[5], rtol=1e-5,
                                   atol=1e-6)
    path = tmp_path / "m.skset"
    skset.save(est, path)
    back = skset.load(path)
    np.testing.assert_array_equal(back.set_scale_floor_, est.set_scale_floor_)
    np.testing.assert_array_equal(back.predict_proba(X), expected)
    del est.set_standardized_  # a model saved before it
    assert est._serving_front() is None or est._serving_front().floor is None


def test_each_sets_mean_is_read():
    """A feature constant within each set that carries the label (a covariate of the set) is read:
    the set's mean is appended beside its shape, so two copies of a set that differ only there
    get other outputs, and the fit separates the training sets."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(4, 10)), 1)) * 10.0 ** rng.integers(-3, 4)
         for _ in range(40)]
    y = rng.integers(0, 2, size=40)
    X = [np.column_stack([x, np.full(len(x), 10.0 * c)]) for x, c in zip(X, y, strict=True)]
    est = DeepSetsClassifier(random_state=0, hidden_size=8, window=1).fit(X, y)
    assert est.set_standardized_
    a, b = X[0].copy(), X[0].copy()
    a[:, 1], b[:, 1] = 0.0, 10.0
    pa, pb = est.predict_proba([a, b])[:, 1]
    assert pb - pa > 0.5 and est.score(X, y) == 1.0


def test_offset_features_keep_their_variation_and_tiny_floors_stay_finite():
    """A feature on an offset of 1e7 with a deviation of 1 is not constant in its set (a test at
    1e-6 of the magnitude read it as 0); a float32 model whose floor lies below float32's range
    (a training set at 1e-46) serves one-element and constant sets as ``predict`` does (its
    float32 floor was 0: log 0, NaN)."""
    rng = np.random.default_rng(5)
    x = np.column_stack([rng.normal(size=20), 1e7 + rng.normal(size=20)])
    shapes, summary = set_standardized([x], scale_floor([x]))
    np.testing.assert_allclose(shapes[0][:, 1], (x[:, 1] - x[:, 1].mean()) / x[:, 1].std(), atol=1e-8)
    np.testing.assert_allclose(summary[0, 3], np.log(x[:, 1].std()), atol=1e-8)
    X, y = _waves(30, rng)
    X = [np.column_stack([s, s[::-1]]) for s in X] + [rng.normal(size=(6, 2)) * 1e-46]
    y = np.r_[y, 1]
    est = DeepSetsClassifier(random_state=0, max_iter=1, hidden_size=8, window=1).fit(X, y)
    assert est.set_standardized_ and est.set_scale_floor_.max() < 1e-45
    T = [np.array([[3.0, -1.0]]), np.full((5, 2), 7.0), X[0]]
    xb, mb = pack(T, dtype=torch.float32)
    with torch.no_grad():
        served = serving_module(est)(xb, mb)[1].numpy()
    assert np.all(np.isfinite(served))
    np.testing.assert_allclose(served, est.predict_proba(T), rtol=1e-4, atol=1e-5)
