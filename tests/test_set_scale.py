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
    feature 0), beside the log of that deviation floored at the floor; the padded tensor version
    the same, padding 0 whatever it held; the floor the smallest positive deviation."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 3)) * 10.0 ** rng.integers(-4, 4) + 5 for n in (1, 2, 7, 40)]
    X[2][:, 1] = 3.25  # constant feature
    floor = scale_floor(X)
    sds = np.stack([x.std(0) for x in X])
    np.testing.assert_allclose(floor, [np.min([v for v in sds[:, j] if v > 1e-9])
                                       for j in range(3)])
    out = set_standardized(X, floor)
    for x, o in zip(X, out, strict=True):
        sd = x.std(0)
        const = ~(sd > 1e-6 * np.abs(x).max(0))
        ref = np.where(const, 0.0, (x - x.mean(0)) / np.where(const, 1, sd))
        ref = np.hstack([ref, np.repeat(np.log(np.maximum(np.where(const, 0, sd), floor))[None],
                                        len(x), 0)])
        np.testing.assert_allclose(o, ref, rtol=1e-12, atol=1e-12)
        assert o.dtype == x.dtype and o.shape == (len(x), 6)
    assert np.all(out[0][:, :3] == 0) and np.all(out[2][:, 1] == 0)
    np.testing.assert_array_equal(out[0][0, 3:], np.log(floor))
    xb, mb = pack(X, dtype=torch.float64)
    xb = torch.where(mb[..., None], xb, torch.tensor(1e6, dtype=torch.float64))  # garbage pads
    tb = set_standardized_tensor(xb, mb, torch.as_tensor(floor))
    for i, o in enumerate(out):
        np.testing.assert_allclose(tb[i, : len(o)].numpy(), o, rtol=1e-10, atol=1e-10)
        assert torch.all(tb[i, len(o):] == 0)
    assert set_standardized([X[3].astype(np.float32)], floor)[0].dtype == np.float32


def test_spread_reads_the_sets_deviations():
    rng = np.random.default_rng(1)
    same = [rng.normal(size=(20, 2)) for _ in range(30)]
    assert scale_spread(same) < 3
    far, _ = _waves(40, rng)
    assert scale_spread(far) > SET_SCALE_SPREAD
    assert scale_spread(far[:9]) == 1.0  # too few sets to read a spread from
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
    assert auto.module_ is not None and auto._in_features == 2 * (5 + 1)  # shape and scale k-mers


def test_sets_of_one_scale_read_as_before():
    """Sets of one scale: ``"auto"`` fits the model ``True`` fits, to the bit."""
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(int(rng.integers(3, 12)), 2)) for _ in range(40)]
    y = np.array([x[:, 0].mean() for x in X])
    a = DeepSetsRegressor(random_state=0, max_iter=3, hidden_size=8).fit(X, y)
    b = DeepSetsRegressor(random_state=0, max_iter=3, hidden_size=8, standardize=True).fit(X, y)
    assert not a.set_standardized_
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_served_module_standardises_each_set(tmp_path):
    """The served module of a model that reads each set by its own scale gives its
    ``predict_proba`` on a padded batch, padding garbage included; ``skset.save`` / ``load``
    keep the floor; a model fitted before the attribute existed has no per-set front."""
    rng = np.random.default_rng(4)
    X, y = _waves(60, rng)
    est = DeepSetsClassifier(random_state=0, max_iter=3, hidden_size=8, window=3).fit(X, y)
    assert est.set_standardized_
    module = serving_module(est)
    xb, mb = pack(X[:7], dtype=torch.float32)
    xb = torch.where(mb[..., None], xb, torch.tensor(3e4))
    with torch.no_grad():
        proba = module(xb, mb)[1].numpy()
    np.testing.assert_allclose(proba, est.predict_proba(X[:7]), rtol=1e-4, atol=1e-5)
    path = tmp_path / "m.skset"
    skset.save(est, path)
    back = skset.load(path)
    np.testing.assert_array_equal(back.set_scale_floor_, est.set_scale_floor_)
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))
    del est.set_standardized_  # a model saved before it
    assert est._serving_front().floor is None
