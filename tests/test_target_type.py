"""``target_type`` of the transformers whose ``"auto"`` rules read ``y``
(:class:`skset.NystromFeatures`, :class:`skset.OTKEmbedding`): whole-number regression targets
read as real numbers, classes read as classes, and the errors of a ``y`` of another kind."""

import warnings

import numpy as np
import pytest

from skset import NystromFeatures, OTKEmbedding
from skset._label_tasks import _targets, _task


def _ramps(n=80, length=40, seed=0):
    """Rising or falling ramps (the sign is the signal) and a real target that follows it."""
    rng = np.random.default_rng(seed)
    sign = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    t = np.linspace(-1.0, 1.0, length)
    X = [(s * t + rng.uniform(-1, 1) + 0.05 * rng.normal(size=length))[:, None] for s in sign]
    return X, 100.0 * sign + rng.normal(0, 20, size=n)


def _choices(y, **kw):
    nf = NystromFeatures(n_components=16, random_state=0, **kw).fit(X_RAMPS, y)
    otk = OTKEmbedding(n_supports=4, random_state=0, **kw).fit(nf.transform(X_RAMPS), y)
    return nf, otk


X_RAMPS, Y_RAMPS = _ramps()


def test_distinct_whole_numbers_are_read_as_real_targets():
    ranks = np.argsort(np.argsort(Y_RAMPS)) * 3.0  # distinct whole numbers, the same order
    nf, otk = _choices(ranks)
    nf_half, otk_half = _choices(ranks + 0.5)  # the same targets, not whole
    assert nf.window_ > 1 and nf.selection_scores_ is not None  # chosen (before: nothing)
    assert (nf.window_, nf.dilation_) == (nf_half.window_, nf_half.dilation_)
    assert otk.position_scores_ is not None
    assert otk.position_sigma_ == otk_half.position_sigma_
    assert _task(ranks, len(ranks)) == "regression"
    assert _task(ranks, len(ranks), "multiclass") is None  # classes of one set: nothing to read


def test_continuous_reads_repeated_whole_numbers_as_real_targets():
    rounded = np.round(Y_RAMPS / 10) * 10  # 3-4 sets share each value: "auto" reads classes
    assert _task(rounded, len(rounded)) == "classification"
    nf, otk = _choices(rounded, target_type="continuous")
    nf_half, otk_half = _choices(rounded + 0.5)
    assert _task(rounded + 0.5, len(rounded)) == "regression"
    assert (nf.window_, nf.dilation_) == (nf_half.window_, nf_half.dilation_)
    np.testing.assert_allclose([s for _, s in nf.window_scores_],
                               [s for _, s in nf_half.window_scores_], rtol=1e-6)
    assert otk.position_sigma_ == otk_half.position_sigma_
    assert otk.position_scores_ == pytest.approx(otk_half.position_scores_, rel=1e-6)


def test_multiclass_reads_numbers_as_classes():
    labels = (Y_RAMPS > 0).astype(np.float64) + 0.25  # two classes given as floats
    strings = np.where(Y_RAMPS > 0, "up", "down")
    nf, otk = _choices(labels, target_type="multiclass")
    nf_s, otk_s = _choices(strings)
    assert (nf.window_, nf.dilation_) == (nf_s.window_, nf_s.dilation_)
    np.testing.assert_allclose([s for _, s in nf.window_scores_],
                               [s for _, s in nf_s.window_scores_], rtol=1e-6)
    assert otk.position_sigma_ == otk_s.position_sigma_
    assert _task(labels, len(labels), "binary") == "classification"


@pytest.mark.parametrize("est", [NystromFeatures(n_components=4), OTKEmbedding(n_supports=2)])
def test_targets_of_another_kind_are_refused(est):
    X = X_RAMPS[:20]
    with pytest.raises(ValueError, match="target_type='binary' got 3 classes"):
        est.set_params(target_type="binary").fit(X, np.arange(20) % 3)
    with pytest.raises(ValueError, match="target_type='continuous' needs numeric targets"):
        est.set_params(target_type="continuous").fit(X, np.where(np.arange(20) % 2, "a", "b"))
    with pytest.raises(ValueError, match="target_type"):
        est.set_params(target_type="ordinal").fit(X, np.arange(20) % 2)


def _far_ordered_sets(n=60, seed=0, offset=1e4):
    """Two classes told apart by where in the set the high values sit, far from zero."""
    rng = np.random.default_rng(seed)
    X, y = [], np.arange(n) % 2
    for c in y:
        m = int(rng.integers(10, 20))
        s = 0.3 * rng.normal(size=(m, 2))
        s[slice(0, m // 2) if c else slice(m // 2, m), 0] += 2.0  # the same values, elsewhere
        X.append(s + offset)
    return X, y


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_similarity_positions_chosen_fit_as_given_positions(dtype):
    """Sets 30 spreads from zero: the ``None`` fit reads them less an offset, positions scaling
    the similarities read them as they are; the positioned candidates are scored as such (they
    were scored on the shifted sets, whose similarity-scaled plans differ: at 1e4 they won by
    -0.0003 against -0.173 and fitted an embedding of 0.55 cross-validated accuracy against
    0.78 without positions)."""
    X, y = _far_ordered_sets(offset=30.0)
    kw = dict(n_supports=3, random_state=0, position_mode="similarity", dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float32: products of far features are rounded
        auto = OTKEmbedding(**kw, position_sigma="auto").fit(X, y)
        given = OTKEmbedding(**kw, position_sigma=auto.position_sigma_).fit(X, y)
    assert auto.position_sigma_ is not None and auto.input_offset_ is None
    assert OTKEmbedding(**kw, position_sigma=None).fit(X).input_offset_ is not None
    assert auto.references_.dtype == given.references_.dtype
    # float32: the given fit's k-means reads the sets at 30 as they are, auto's less the offset
    tol = dict(rtol=0, atol=0) if dtype == "float64" else dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(auto.mean_, given.mean_, **tol)
    np.testing.assert_allclose(auto.transform(X), given.transform(X), **tol)


def test_similarity_positions_not_chosen_fit_as_none():
    X, _ = _far_ordered_sets()
    kw = dict(n_supports=3, random_state=0, position_mode="similarity")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the None fit reads the sets less their offset: no warning
        auto = OTKEmbedding(**kw).fit(X)  # no labels: nothing chosen
    none = OTKEmbedding(**kw, position_sigma=None).fit(X)
    assert auto.position_sigma_ is None
    np.testing.assert_array_equal(auto.input_offset_, none.input_offset_)
    np.testing.assert_array_equal(auto.transform(X), none.transform(X))


@pytest.mark.parametrize("scale", [1e-300, 1e300, 5e-324 * 2**40])
def test_real_targets_of_any_scale_set_the_same_proxy_targets(scale):
    y = np.array([1.0, 2.0, 3.0, 7.0, -4.0])
    np.testing.assert_allclose(_targets("regression", y * scale), _targets("regression", y),
                               rtol=1e-12)
    ramp = Y_RAMPS * scale
    nf = NystromFeatures(n_components=16, random_state=0).fit(X_RAMPS, ramp)
    ref = NystromFeatures(n_components=16, random_state=0).fit(X_RAMPS, Y_RAMPS)
    assert (nf.window_, nf.dilation_, nf.normalize_) == (ref.window_, ref.dilation_, ref.normalize_)


def test_similarity_positions_far_from_zero_are_scored_as_they_would_fit():
    """At 1e4 spreads similarity-scaled positions read products of the far features: scored on
    the sets as given (as such a fit would read them), they lose to no positions, which keeps
    the offset (the ``None`` fit)."""
    X, y = _far_ordered_sets()
    kw = dict(n_supports=3, random_state=0, position_mode="similarity", dtype="float64")
    auto = OTKEmbedding(**kw).fit(X, y)
    positions = OTKEmbedding(**kw, position_sigma=0.3).fit(X, y)
    none = OTKEmbedding(**kw, position_sigma=None).fit(X, y)
    assert auto.position_scores_["positions"] < auto.position_scores_["none"]
    assert auto.position_sigma_ is None
    np.testing.assert_array_equal(auto.transform(X), none.transform(X))
    assert positions.input_offset_ is None  # the model the positions' score describes


@pytest.mark.parametrize("make", [lambda tt: NystromFeatures(n_components=4, window=1,
                                                             bandwidth=1.0, standardize=True,
                                                             normalize=False, target_type=tt),
                                  lambda tt: OTKEmbedding(n_supports=2, position_sigma=None,
                                                          target_type=tt)])
def test_targets_of_another_kind_are_refused_even_where_no_rule_reads_them(make):
    """Every parameter fixed (no rule reads ``y``) and six sets (too few for a rule): the
    refusals held only where a rule read ``y``."""
    for X in (X_RAMPS[:6], X_RAMPS[:20]):
        n = len(X)
        with pytest.raises(ValueError, match="target_type='binary' got 3 classes"):
            make("binary").fit(X, np.arange(n) % 3)
        with pytest.raises(ValueError, match="target_type='continuous' needs numeric"):
            make("continuous").fit(X, np.where(np.arange(n) % 2, "a", "b"))


def test_a_pool_reads_its_labels_on_every_row_before_sampling_them():
    """A pool of 6,000 rows of 1,000 integer classes of six rows each: every class is shared,
    but the rule's sample of 600 rows holds mostly classes of one row, which "auto" read as
    real targets; the kind is now read on every row, as the same labels as strings are."""
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(1000), 6)
    pool = rng.normal(size=(6000, 3)) + 0.01 * labels[:, None]
    assert _task(labels, len(labels)) == "classification"
    ints = NystromFeatures(n_components=8, random_state=0).fit(pool, labels)
    strs = NystromFeatures(n_components=8, random_state=0).fit(pool, labels.astype(str))
    assert ints.selection_scores_ is not None
    np.testing.assert_allclose([s for _, s in ints.selection_scores_],
                               [s for _, s in strs.selection_scores_], rtol=1e-9)
