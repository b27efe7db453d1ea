"""DilatedKernelFeatures and its engine, skset.nn.dilated_kernels: against a naive loop over the
series, kernels, dilations and thresholds, invariant to the batch a series is computed in, and
in scikit-learn's tools."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.linear_model import RidgeClassifierCV
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skset import DilatedKernelFeatures
from skset.dilated_kernels import dilations_for
from skset.nn.dilated_kernels import KERNEL_TAPS, DilatedKernelPPV, kernel_responses


def _naive_responses(x, dilation, channels=None):
    """``(84, n)``: each kernel's response, a loop over kernels and taps, zero beyond ``x``."""
    x = np.asarray(x, dtype=float)
    n, n_channels = x.shape
    out = np.zeros((len(KERNEL_TAPS), n))
    for k, taps in enumerate(KERNEL_TAPS):
        weights = np.full(9, -1.0)
        weights[list(taps)] = 2.0
        used = np.ones(n_channels) if channels is None else channels[k]
        series = (x * used).sum(1)
        for t in range(n):
            for j in range(9):
                u = t + (j - 4) * dilation
                if 0 <= u < n:
                    out[k, t] += weights[j] * series[u]
    return out


def _naive_features(est, x):
    feats = []
    for i, d in enumerate(est.dilations_):
        chan = None if est.channels_ is None else est.channels_[i]
        r = _naive_responses(x, d, chan)
        for k in range(len(KERNEL_TAPS)):
            feats.extend((r[k] > b).mean() for b in est.thresholds_[i, k])
    return np.array(feats)


def _series(n_sets=10, channels=1, seed=0, low=1, high=60):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(int(rng.integers(low, high)), channels)) for _ in range(n_sets)]


def test_the_84_kernels():
    assert len(KERNEL_TAPS) == len(set(KERNEL_TAPS)) == 84
    assert all(len(t) == 3 and len(set(t)) == 3 for t in KERNEL_TAPS)


@pytest.mark.parametrize("channels", [1, 4])
def test_transform_equals_a_naive_loop(channels):
    # series of two points or more: a threshold drawn from a series of one point is that
    # point's response itself, which the loop, summing in another order, may round past
    X = _series(8, channels, seed=channels, low=2)
    est = DilatedKernelFeatures(n_thresholds=5, dtype="float64", random_state=0).fit(X)
    expected = np.stack([_naive_features(est, x) for x in X])
    np.testing.assert_array_equal(est.transform(X), expected)


def test_responses_equal_a_naive_loop_and_ignore_padding():
    rng = np.random.default_rng(1)
    x = torch.as_tensor(rng.normal(size=(3, 30, 1)))
    mask = torch.ones(3, 30, dtype=torch.bool)
    mask[1, 17:] = False
    x[1, 17:] = float("nan")  # padding may hold garbage
    r = kernel_responses(x, mask, 3)
    assert r.shape == (84, 3, 30)
    np.testing.assert_allclose(r[:, 1, :17].numpy(), _naive_responses(x[1, :17].numpy(), 3),
                               rtol=0, atol=1e-12)


def test_a_series_alone_equals_it_in_any_batch():
    X = _series(12, 2, seed=3, high=200)
    est = DilatedKernelFeatures(random_state=0).fit(X)
    batch = est.transform(X)
    alone = np.vstack([est.transform([x]) for x in X])
    np.testing.assert_array_equal(batch, alone)
    small = DilatedKernelFeatures(max_elements=50, random_state=0).fit(X)
    np.testing.assert_array_equal(small.transform(X), batch)  # many small batches


def test_fitted_attributes():
    X = _series(15, 1, seed=4, low=100, high=101)
    est = DilatedKernelFeatures(n_thresholds=7, max_dilations=5, random_state=0).fit(X)
    assert est.dilations_ == dilations_for(100, 5) == [1, 3, 6, 12]  # 1.88 rounds down to 1
    assert est.channels_ is None and est.n_features_in_ == 1
    assert est.thresholds_.shape == (4, 84, 7)
    assert est.transform(X).shape == (15, 4 * 84 * 7)
    assert len(est.get_feature_names_out()) == 4 * 84 * 7
    # each kernel's thresholds at each dilation are the quantiles of its responses over one
    # training series (MiniRocket's draw: one per kernel and dilation), not all the same one
    levels = (np.arange(1, 8) * (np.sqrt(5) - 1) / 2) % 1.0
    for i, d in enumerate(est.dilations_):
        quantiles = np.stack([np.quantile(_naive_responses(x, d), levels, axis=1).T for x in X])
        match = np.isclose(quantiles, est.thresholds_[i][None], atol=1e-4).all(-1)  # (15, 84)
        assert match.any(0).all()
        assert len(np.unique(match.argmax(0))) > 5


def test_thresholds_do_not_depend_on_the_batch_budget():
    X = _series(12, 2, seed=6, low=5, high=90)
    a = DilatedKernelFeatures(random_state=3, dtype="float64").fit(X).thresholds_
    b = DilatedKernelFeatures(random_state=3, dtype="float64", max_elements=40).fit(X).thresholds_
    np.testing.assert_array_equal(a, b)


def test_channels_drawn_per_kernel_and_dilation():
    X = _series(6, 12, seed=5)
    est = DilatedKernelFeatures(random_state=0).fit(X)
    per_kernel = est.channels_.sum(-1)
    assert est.channels_.shape == (len(est.dilations_), 84, 12)
    assert per_kernel.min() >= 1 and per_kernel.max() <= 9 and len(np.unique(per_kernel)) > 3


def test_dilations_span_the_median_length():
    assert dilations_for(1, 8) == [1]
    assert dilations_for(9, 8) == [1]
    assert dilations_for(1460, 8) == [1, 2, 4, 9, 19, 41, 86, 182]
    assert max(dilations_for(1460, 8)) * 8 <= 1459
    X = _series(5, 1, low=3, high=4) + _series(6, 1, seed=1, low=500, high=501)
    assert DilatedKernelFeatures().fit(X).dilations_[-1] == dilations_for(500, 8)[-1]
    # the largest dilation is always the one whose taps span the length (2 ** log2(5) rounds
    # to 4.999...: lengths 41, 73, 81, ... lost it)
    assert dilations_for(41, 8)[-1] == 5
    assert all(max(dilations_for(n, 8)) == (n - 1) // 8 for n in range(9, 3000))


def test_nearly_equal_weights_choose_the_unweighted_dilations():
    # the weighted median of the lengths is np.median's at equal weights, up to rounding
    X = _series(2, 1, low=17, high=18) + _series(2, 1, seed=1, low=41, high=42)
    none = DilatedKernelFeatures(random_state=0).fit(X).dilations_
    for w in ([1, 1, 1, 1 + 1e-12], [1 + 1e-12, 1, 1, 1], [0.5] * 4):
        assert DilatedKernelFeatures(random_state=0).fit(X, sample_weight=w).dilations_ == none
    # integer weights are copies: the median of the repeated lengths
    twice = DilatedKernelFeatures(random_state=0).fit(X + X[:1], sample_weight=None).dilations_
    assert DilatedKernelFeatures(random_state=0).fit(
        X, sample_weight=[2, 1, 1, 1]).dilations_ == twice


def test_several_channels_in_float64():
    X = _series(4, 3, low=30, high=31)
    for dtype in (torch.float64, "float64"):
        est = DilatedKernelFeatures(dtype=dtype, random_state=0).fit(X)
        assert est.channels_.dtype == np.float64 and est.transform(X).dtype == np.float64


def test_the_module_is_the_transform():
    X = _series(9, 3, seed=6)
    est = DilatedKernelFeatures(n_thresholds=4, dtype="float64", random_state=1).fit(X)
    module = est.to_module()
    assert isinstance(module, DilatedKernelPPV)
    from skset._sets import pack
    x, mask = pack(X, dtype=torch.float64)
    np.testing.assert_array_equal(module(x, mask).numpy(), est.transform(X))


def test_level_does_not_move_the_inner_responses():
    """The kernels sum to zero: a constant added to a series moves only the responses whose taps
    reach beyond it (where zeros are read)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(50, 1))
    mask = torch.ones(1, 50, dtype=torch.bool)
    a = kernel_responses(torch.as_tensor(x[None]), mask, 2)
    b = kernel_responses(torch.as_tensor(x[None] + 5.0), mask, 2)
    torch.testing.assert_close(a[..., 8:-8], b[..., 8:-8])
    assert not torch.allclose(a[..., :8], b[..., :8])


def test_bad_inputs():
    est = DilatedKernelFeatures().fit(_series(4))
    with pytest.raises(ValueError, match="set 1 is empty"):
        est.transform([np.zeros((3, 1)), np.zeros((0, 1))])
    with pytest.raises(ValueError, match="set 0 contains NaN"):
        est.transform([np.full((3, 1), np.nan)])
    with pytest.raises(ValueError, match="2 features"):
        est.transform([np.zeros((3, 2))])
    with pytest.raises(ValueError, match="1-D"):
        DilatedKernelFeatures().fit([np.zeros(5)])


def test_separates_two_frequencies_and_tunes_in_a_grid_search():
    rng = np.random.default_rng(8)
    X = [np.sin(np.linspace(0, 12, int(rng.integers(40, 90))) * (1 + i % 2)
                + rng.uniform(0, 6))[:, None] + 0.1 * rng.normal(size=(1, 1))
         for i in range(40)]
    y = np.arange(40) % 2
    pipe = make_pipeline(DilatedKernelFeatures(random_state=0), StandardScaler(),
                         RidgeClassifierCV())
    search = GridSearchCV(pipe, {"dilatedkernelfeatures__n_thresholds": [2, 6]}, cv=2)
    search.fit(X[:30], y[:30])
    assert search.score(X[30:], y[30:]) == 1.0


def test_partial_fit_fits_on_the_first_chunk_only():
    X = _series(12, 2, seed=9)
    est = DilatedKernelFeatures(random_state=0).partial_fit(X[:6])
    first = est.thresholds_.copy()
    np.testing.assert_array_equal(est.partial_fit(X[6:]).thresholds_, first)
    np.testing.assert_array_equal(
        est.transform(X), DilatedKernelFeatures(random_state=0).fit(X[:6]).transform(X))
    with pytest.raises(ValueError, match="3 features"):
        est.partial_fit([np.zeros((4, 3))])
    with pytest.raises(ValueError, match="dtype"):  # a later chunk continues the fitted dtype
        est.set_params(dtype="float64").partial_fit(X[6:])
    np.testing.assert_array_equal(est.thresholds_, first)


def test_a_pipeline_learns_from_chunks():
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import Pipeline

    from skset.utils import partial_fit

    rng = np.random.default_rng(10)
    X = [np.sin(np.linspace(0, 12, int(rng.integers(40, 90))) * (1 + i % 2)
                + rng.uniform(0, 6))[:, None] for i in range(60)]
    y = np.arange(60) % 2
    pipe = Pipeline([("dk", DilatedKernelFeatures(n_thresholds=4, random_state=0)),
                     ("scale", StandardScaler()), ("clf", SGDClassifier(random_state=0))])
    for start in range(0, 40, 10):
        partial_fit(pipe, X[start:start + 10], y[start:start + 10], classes=[0, 1])
    assert pipe.score(X[40:], y[40:]) >= 0.8  # 0.85: far above chance on 20 test series


def test_quantiles_are_numpys():
    from skset.dilated_kernels import _quantiles

    rng = np.random.default_rng(11)
    levels = np.array([0.0, 0.1, 0.618, 0.99, 1.0])
    for n in (1, 2, 7, 1000):
        r = rng.normal(size=(5, n))
        got = _quantiles(torch.as_tensor(r), torch.as_tensor(levels)).numpy()
        np.testing.assert_allclose(got, np.quantile(r, levels, axis=1).T, rtol=0, atol=1e-12)
    # rows of their own lengths, the rest of each row garbage
    lengths = np.array([1, 2, 7, 30])
    r = rng.normal(size=(4, 30)) * 1e6
    got = _quantiles(torch.as_tensor(r), torch.as_tensor(levels), torch.as_tensor(lengths))
    for row, n in enumerate(lengths):
        np.testing.assert_allclose(got[row].numpy(), np.quantile(r[row, :n], levels), rtol=0,
                                   atol=1e-6)


def test_a_series_longer_than_torch_quantile_takes():
    x = np.sin(np.arange(210_000) / 50.0)[:, None]
    est = DilatedKernelFeatures(n_thresholds=2, max_dilations=2, random_state=0).fit([x])
    assert est.transform([x]).shape == (1, 2 * 84 * 2)


def test_series_laid_out_channels_first_are_flagged():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 12, 40))  # aeon's (n_series, n_channels, n_timepoints)
    with pytest.warns(UserWarning, match=r"transpose\(0, 2, 1\)") as record:
        DilatedKernelFeatures(random_state=0).fit(X)
    assert record[0].filename == __file__  # the warning points at the user's call
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DilatedKernelFeatures(random_state=0).fit(X.transpose(0, 2, 1))
    with pytest.raises(ValueError, match=r"X\[:, :, None\]"):
        DilatedKernelFeatures().fit(X[:, 0])


def test_sample_weight_draws_the_threshold_series():
    X = _series(12, 2, seed=11, low=20, high=80)
    plain = DilatedKernelFeatures(n_thresholds=3, random_state=0).fit(X)
    for w in (np.ones(12), np.full(12, 3.5)):  # equal weights: the unweighted fit, draw for draw
        same = DilatedKernelFeatures(n_thresholds=3, random_state=0).fit(X, sample_weight=w)
        np.testing.assert_array_equal(same.thresholds_, plain.thresholds_)
        np.testing.assert_array_equal(same.channels_, plain.channels_)
    # weight on one series only: every kernel's thresholds are quantiles of that series' responses
    w = np.zeros(12)
    w[4] = 2.0
    only = DilatedKernelFeatures(n_thresholds=3, random_state=0).fit(X, sample_weight=w)
    alone = DilatedKernelFeatures(n_thresholds=3, random_state=0).fit([X[4]] * 12)
    assert only.dilations_ == dilations_for(len(X[4]), 8)  # the weighted median length
    np.testing.assert_allclose(only.thresholds_, alone.thresholds_, rtol=1e-6, atol=1e-6)
    # zero weights are never drawn: each kernel's thresholds come from a series of weight 1
    X = _series(12, 1, seed=14, low=40, high=41)  # one length: the same dilations in every fit
    w = np.r_[np.ones(6), np.zeros(6)]
    kept = DilatedKernelFeatures(n_thresholds=3, random_state=0).fit(X, sample_weight=w)
    responses = [DilatedKernelFeatures(n_thresholds=3, random_state=0).fit([x] * 12).thresholds_
                 for x in X]
    for i in range(len(kept.dilations_)):
        for k in range(len(KERNEL_TAPS)):
            source = [j for j in range(12) if np.allclose(responses[j][i, k], kept.thresholds_[i, k],
                                                          rtol=1e-6, atol=1e-6)]
            assert source and min(source) < 6, (i, k)


@pytest.mark.parametrize("w, match", [(np.ones(5), "sample_weight"),
                                      (-np.ones(12), "sample_weight"),
                                      (np.zeros(12), "sample_weight")])
def test_bad_sample_weight_is_named(w, match):
    X = _series(12, seed=12)
    with pytest.raises(ValueError, match=match):
        DilatedKernelFeatures(random_state=0).fit(X, sample_weight=w)
    est = DilatedKernelFeatures(random_state=0).partial_fit(X)
    with pytest.raises(ValueError, match=match):  # a later chunk's weights are checked too
        est.partial_fit(X, sample_weight=w)


def test_pipeline_routes_sample_weight():
    X = _series(20, seed=13, low=30, high=60)
    y = np.arange(20) % 2
    w = np.r_[np.ones(10), np.zeros(10)]
    pipe = make_pipeline(DilatedKernelFeatures(n_thresholds=3, random_state=0), StandardScaler(),
                         RidgeClassifierCV())
    pipe.fit(X, y, dilatedkernelfeatures__sample_weight=w)
    direct = DilatedKernelFeatures(n_thresholds=3, random_state=0).fit(X, sample_weight=w)
    np.testing.assert_array_equal(pipe[0].thresholds_, direct.thresholds_)


def test_the_module_is_a_copy_of_the_fitted_map():
    """``to_module()`` (and a serving module made from it) owns its thresholds and channels: a
    checkpoint loaded into it, or an edit in place, leaves the estimator's map as it was (they
    had shared the estimator's arrays)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(10, 40)), 3)) for _ in range(10)]
    est = DilatedKernelFeatures(n_thresholds=3, max_dilations=3, random_state=0).fit(X)
    before = est.transform(X)
    layer = est.to_module()
    with torch.no_grad():
        layer.thresholds.fill_(1e9)
        if layer.channels is not None:
            layer.channels.zero_()
    np.testing.assert_array_equal(est.transform(X), before)


def test_weights_equal_up_to_rounding_fit_as_no_weights():
    """Weights equal up to rounding (1/3 six times, the last three summed as 1 - 2/3) draw as
    the unweighted fit (an exact test switched the draws: transform 0.42 apart)."""
    from skset import DilatedKernelFeatures

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 1)) for n in rng.integers(20, 60, 6)]
    w = np.array([1 / 3] * 3 + [1 - 2 / 3] * 3)
    a = DilatedKernelFeatures(random_state=0).fit(X, sample_weight=w)
    b = DilatedKernelFeatures(random_state=0).fit(X)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_several_channels_a_set_alone_equals_it_in_a_batch(dtype):
    """Each kernel's channels are summed once per point (in float64, exact for float32 values;
    float64 values channel by channel in one order), then shifted into taps: a set's features
    do not depend on the batch (a product's rounding followed the batch's shape, and a
    threshold flipped: a feature 1/6 apart in float32, 0.5 in float64), nor do the thresholds
    on the memory budget ``max_elements``."""
    import torch

    from skset import DilatedKernelFeatures
    from skset._sets import pack
    from skset.nn.dilated_kernels import kernel_responses

    rng = np.random.default_rng(3 * 10**6 + 1658)
    n_sets, c = int(rng.integers(1, 12)), int(rng.integers(1, 12))
    X = [rng.normal(size=(int(n), c)) * 10.0 ** rng.integers(-3, 4)
         for n in rng.integers(1, 120, n_sets)]
    sw = None if rng.random() < 0.5 else np.r_[1.0, rng.integers(0, 3, n_sets - 1)]
    f = DilatedKernelFeatures(n_thresholds=3, max_dilations=5, random_state=46, dtype=dtype,
                              max_elements=205).fit(X, sample_weight=sw)
    np.testing.assert_array_equal(f.transform([X[-1]])[0], f.transform(X)[-1])
    chan = torch.as_tensor(f.channels_[0])
    tdt = getattr(torch, dtype)
    xb, mb = pack(X, dtype=tdt)
    xa, ma = pack([X[-1]], dtype=tdt)
    n = len(X[-1])
    assert torch.equal(kernel_responses(xb, mb, f.dilations_[0], chan)[:, -1, :n],
                       kernel_responses(xa, ma, f.dilations_[0], chan)[:, 0, :n])


def test_float64_channels_alone_equals_batch_and_budget():
    """Twelve float64 channels of short series with flat stretches (thresholds sit on
    responses): every set's features alone equal those in the whole batch, and the fitted
    thresholds do not change with ``max_elements`` (a float64 product summed the channels in an
    order set by the batch's shape: features 0.5 apart, thresholds 7e-15 apart)."""
    from skset import DilatedKernelFeatures

    rng = np.random.default_rng(7)
    X = [np.round(rng.normal(size=(int(n), 12)), 1) for n in rng.integers(4, 40, 30)]
    f = DilatedKernelFeatures(dtype="float64", random_state=0).fit(X)
    together = f.transform(X)
    for i in range(len(X)):
        np.testing.assert_array_equal(f.transform([X[i]])[0], together[i])
    small = DilatedKernelFeatures(dtype="float64", random_state=0, max_elements=50).fit(X)
    np.testing.assert_array_equal(small.thresholds_, f.thresholds_)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_module_every_channel_alone_equals_batch(dtype):
    """``channels=None`` (every channel summed) with five channels: a set's responses and
    features alone equal those in a padded batch of longer sets (a reduction over the channel
    axis followed the batch's shape: 153 of 252 features apart, thresholds at the set's own
    responses), and ``mask=None`` reads every point."""
    from skset._sets import pack
    from skset.nn import DilatedKernelPPV
    from skset.nn.dilated_kernels import kernel_responses

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 5)) for n in (3, 50, 120, 7)]
    xa, ma = pack(X[:1], dtype=dtype)
    xb, mb = pack(X, dtype=dtype)
    ra = kernel_responses(xa, ma, 1)[:, 0]
    assert torch.equal(ra, kernel_responses(xb, mb, 1)[:, 0, :3])
    m = DilatedKernelPPV([1], ra.clone()[None])
    assert torch.equal(m(xa, ma)[0], m(xb, mb)[0])
    assert torch.equal(m(xa), m(xa, ma))
