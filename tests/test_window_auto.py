"""``NystromFeatures(window="auto")``: the k-mer width chosen from the labels.

k-mers are taken when the order of the elements carries the class (series whose classes share
every value but not their order), single elements when it does not (bags of i.i.d. elements);
a width kept at 1 fits exactly as ``window=1``; the chosen width holds in transform, the layer,
pickling, ``partial_fit``, searches and the serving module."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from skset import NystromFeatures, OTKEmbedding
from skset._map_selection import (
    WINDOW_CANDIDATES,
    dilated_candidates,
    select_window,
    window_candidates,
)
from skset._sets import pack


def _order_task(n=60, length=40, seed=0):
    """Two classes of univariate series with the same values in another order: a rising and a
    falling ramp, each with noise and a random level. Single time points cannot tell them apart
    (the same marginal distribution); short k-mers can."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    t = np.linspace(-1.0, 1.0, length)
    X = [((t if c else -t) + rng.uniform(-1, 1) + 0.05 * rng.normal(size=length))[:, None]
         for c in y]
    return X, y


def _bag_task(n=60, seed=0):
    """Bags of i.i.d. elements whose class moves their mean: order carries nothing."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = [rng.normal(loc=0.8 * c, size=(int(rng.integers(30, 50)), 3)) for c in y]
    return X, y


def test_candidate_widths_fit_twice_in_every_set():
    assert window_candidates([7, 30]) == [1, 3]
    assert window_candidates([40, 100]) == [1, *WINDOW_CANDIDATES]
    assert window_candidates([5]) == [1]
    assert window_candidates([]) == [1]


def test_a_few_short_sets_among_many_leave_the_widths():
    """One set in a hundred (rounded down) may be too short to hold a width twice; under 100
    sets none may: one truncated recording among hundreds does not turn k-mers off."""
    assert window_candidates([7] * 2 + [40] * 198) == [1, *WINDOW_CANDIDATES]
    assert window_candidates([7] * 3 + [40] * 197) == [1, 3]
    assert window_candidates([2] + [40] * 99) == [1, *WINDOW_CANDIDATES]
    assert window_candidates([2] + [40] * 98) == [1]
    assert window_candidates([25] + [40] * 99) == [1, 3, 5, 10, 20]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_one_short_training_set_keeps_the_networks_kmers():
    """Before, one 3-step series among 200 of 40 left the widths out: Deep Sets read single
    time points of series whose classes differ only by order, at chance. The fitted models
    read the short set as one k-mer."""
    from skset import DeepSetsClassifier

    X, y = _order_task(n=200)
    X[5] = X[5][:3]
    nf = NystromFeatures(n_components=16, random_state=0).fit(X, y)
    assert nf.window_ > 1 and nf.dilation_ == 1
    assert nf.transform(X[5:6])[0].shape == (1, nf.n_components_)
    ds = DeepSetsClassifier(max_iter=5, random_state=0).fit(X, y)
    assert ds.window_ > 1


def test_order_task_takes_kmers_and_they_help():
    X, y = _order_task()
    Xt, yt = _order_task(seed=1)
    nf = NystromFeatures(n_components=16, window="auto", random_state=0).fit(X, y)
    assert nf.window_ > 1
    lengths = [len(x) for x in X]
    assert [w for w, _ in nf.window_scores_] == (window_candidates(lengths)
                                                 + dilated_candidates(lengths))
    assert nf.dilation_ == 1  # contiguous 10-mers read ramps as well as any dilated pair
    best = max((ws for ws in nf.window_scores_ if not isinstance(ws[0], tuple)),
               key=lambda ws: ws[1])
    assert best[0] == nf.window_
    out = nf.transform(Xt)
    assert [o.shape for o in out] == [(len(x) - nf.window_ + 1, nf.n_components_) for x in Xt]

    def accuracy(window):  # no positions: they read the order too (tests/test_position_auto.py)
        pipe = make_pipeline(NystromFeatures(n_components=16, window=window, random_state=0),
                             OTKEmbedding(n_supports=2, position_sigma=None, random_state=0),
                             LogisticRegression())
        return pipe.fit(X, y).score(Xt, yt)

    assert accuracy("auto") >= 0.9 > accuracy(1) + 0.2


def test_sets_of_weight_zero_take_no_part_in_the_choices():
    # short noisy sets of weight 0 once cut the candidate widths to their length and were
    # scored by the map rule; an explicit window longer than them was refused
    X, y = _order_task(n=40)
    rng = np.random.default_rng(1)
    Xz = X + [rng.normal(size=(3, 1)) for _ in range(4)]
    yz = np.r_[y, [0, 1, 0, 1]]
    w = np.r_[np.ones(len(X)), np.zeros(4)]
    alone = NystromFeatures(n_components=8, random_state=0).fit(X, y)
    assert alone.window_ > 3
    import pandas as pd

    for Xs in (Xz, np.array(Xz, dtype=object), pd.Series(Xz, index=np.arange(100, 144))):
        zero = NystromFeatures(n_components=8, random_state=0).fit(Xs, yz, sample_weight=w)
        assert zero.window_ == alone.window_ and zero.window_scores_ == alone.window_scores_
        assert zero.selection_scores_ == alone.selection_scores_
        np.testing.assert_array_equal(zero.anchors_, alone.anchors_)
    fixed = NystromFeatures(n_components=8, window=5, dilation=1, random_state=0)
    assert fixed.fit(Xz, yz, sample_weight=w).window_ == 5
    with pytest.raises(ValueError, match="set 40 has 3 elements"):  # named as given
        clone(fixed).fit(Xz, yz, sample_weight=np.ones(len(Xz)))


def test_bags_keep_single_elements_and_fit_as_window_one():
    X, y = _bag_task()
    auto = NystromFeatures(n_components=8, window="auto", random_state=0).fit(X, y)
    assert auto.window_ == 1 and auto.window_scores_ is not None
    one = NystromFeatures(n_components=8, window=1, random_state=0).fit(X, y)
    assert one.window_ == 1 and one.window_scores_ is None
    for a, b in zip(auto.transform(X), one.transform(X)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", ["no labels", "pool of rows", "short sets"])
def test_nothing_to_choose_from_gives_one(case):
    X, y = _order_task()
    if case == "no labels":
        y = None
    elif case == "pool of rows":
        X, y = np.concatenate(X[:4]), np.repeat(y[:4], 40)
    else:
        X = [x[:5] for x in X]  # no width fits twice
    nf = NystromFeatures(n_components=8, window="auto", random_state=0).fit(X, y)
    assert nf.window_ == 1 and nf.window_scores_ is None


def test_chosen_width_in_layer_pickle_clone_and_search():
    X, y = _order_task()
    nf = NystromFeatures(n_components=8, window="auto", dtype="float64", random_state=0).fit(X, y)
    w = nf.window_
    assert w > 1 and nf._coded  # level + shape coding, the default
    out = nf.transform(X)
    # the layer computes the same map
    Xp, M = pack(X, dtype=torch.float64)
    with torch.no_grad():
        feats, mask = nf.to_module()(Xp, M)
    np.testing.assert_allclose(feats[mask].numpy(), np.concatenate(out), atol=1e-10)
    # pickled, the fitted width stays
    back = pickle.loads(pickle.dumps(nf))
    assert back.window == "auto" and back.window_ == w
    for a, b in zip(back.transform(X), out):
        np.testing.assert_array_equal(a, b)
    assert clone(nf).get_params()["window"] == "auto"
    # explicit widths stay searchable beside "auto"
    pipe = make_pipeline(NystromFeatures(n_components=8, random_state=0),
                         OTKEmbedding(n_supports=2, position_sigma=None, random_state=0),
                         LogisticRegression())
    search = GridSearchCV(pipe, {"nystromfeatures__window": [1, "auto"]}, cv=2).fit(X, y)
    assert search.best_params_["nystromfeatures__window"] == "auto"


def test_partial_fit_continues_the_chosen_width_and_refuses_another():
    X, y = _order_task()
    nf = NystromFeatures(n_components=8, window="auto", random_state=0)
    nf.partial_fit(X[:40], y[:40])
    w = nf.window_
    assert w > 1
    nf.partial_fit(X[40:])  # continues with the width chosen on the first chunk
    assert nf.window_ == w and nf.n_steps_ == 2
    nf.set_params(window=w).partial_fit(X[40:])  # the same width, now explicit
    assert nf.window_ == w and nf.n_steps_ == 3
    other = next(c for c in (1, 3, 5) if c != w)
    with pytest.raises(ValueError, match="partial_fit continues the fitted model"):
        nf.set_params(window=other).partial_fit(X[40:])


def test_a_test_set_shorter_than_the_chosen_width_is_one_kmer():
    # the width was chosen on the training sets: a shorter test set is read as one k-mer, its
    # last element repeated (never an error about a window the user did not give)
    X, y = _order_task()
    nf = NystromFeatures(n_components=8, window="auto", random_state=0).fit(X, y)
    w = nf.window_
    assert w > 1
    for n in (1, w - 1):
        short = X[1][:n]
        padded = short[np.minimum(np.arange(w), n - 1)]
        out = nf.transform([X[0], short])
        assert out[1].shape[0] == 1
        # equal to float32 rounding: on a GPU a batch of another shape may take another
        # matrix-product kernel (they differed by 3e-8 on an H200)
        np.testing.assert_allclose(out[1], nf.transform([padded])[0], rtol=1e-5, atol=1e-7)


def test_select_window_matches_its_scores_and_the_incumbent_rule():
    X, y = _order_task()
    choice = {"standardize": True, "normalize": False, "keep_norm": True, "bandwidth": 0.5}
    kw = dict(kmer_coding="level_shape", fixed={}, default=choice, n_components=16,
              eigenvalue_floor=1e-6)
    w, d, scores = select_window(X, y, rng=np.random.RandomState(0), **kw)
    widths = window_candidates([len(x) for x in X])
    assert [s[0] for s in scores] == widths and w == max(scores, key=lambda s: s[1])[0]
    assert d == 1  # dilated k-mers only with dilate=True
    # no width to compare, or labels that cannot be scored: 1
    assert select_window([x[:5] for x in X], y, rng=np.random.RandomState(0), **kw) == (1, 1,
                                                                                          None)
    assert select_window(X, np.zeros(len(X)), rng=np.random.RandomState(0), **kw) == (1, 1, None)


@pytest.mark.parametrize("cls", ["OTKClassifier", "OTKRegressor"])
def test_supervised_otk_chooses_the_width_too(cls):
    import skset

    X, y = _order_task()
    Xt, yt = _order_task(seed=1)
    est_cls = getattr(skset, cls)
    kw = dict(n_components=8, n_supports=3, max_iter=2, random_state=0, device="cpu")
    target = y if cls == "OTKClassifier" else y.astype(float)
    est = est_cls(window="auto", **kw).fit(X, target)
    assert est.window_ == est.nystrom_.window_ > 1
    assert est.module_.window == est.window_
    assert est.predict(Xt).shape == (len(Xt),)
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.predict(Xt), est.predict(Xt))
    # a fresh fit chooses again: on unordered bags, single elements
    B, yb = _bag_task()
    est.fit(B, yb if cls == "OTKClassifier" else yb.astype(float))
    assert est.window_ == 1
    # an explicit width is kept
    assert est_cls(window=3, **kw).fit(X, target).window_ == 3
    if cls == "OTKClassifier":
        assert est_cls(window="auto", **kw).fit(X, target).score(Xt, yt) > 0.8


@pytest.mark.parametrize("cls", ["OTKClassifier", "OTKRegressor"])
def test_supervised_models_choose_their_width_by_default(cls):
    import skset

    est_cls = getattr(skset, cls)
    assert est_cls().window == "auto"
    X, y = _order_task()
    est = est_cls(n_components=8, n_supports=3, max_iter=1, random_state=0, device="cpu")
    assert est.fit(X, y if cls == "OTKClassifier" else y.astype(float)).window_ > 1


def test_the_rule_builds_only_the_kmers_it_samples(monkeypatch):
    # long sequences: the rule codes at most WINDOW_PER_SET k-mers of a set, never all of them
    import skset._map_selection as ms

    rng = np.random.default_rng(0)
    y = np.arange(20) % 2
    X = [np.cumsum(rng.normal(size=(3000, 2)), 0) for _ in y]
    built = []
    real = ms.code_kmers

    def counted(steps, coding):
        built.append(len(steps))
        return real(steps, coding)

    monkeypatch.setattr(ms, "code_kmers", counted)
    kw = dict(kmer_coding="level_shape", fixed={}, default=ms.DEFAULT_CHOICE, n_components=16,
              eigenvalue_floor=1e-6, rng=np.random.RandomState(0))
    _, _, scores = select_window(X, y, **kw)
    assert [w for w, _ in scores] == [1, *WINDOW_CANDIDATES]
    assert len(built) == 20 * len(WINDOW_CANDIDATES) and max(built) == ms.WINDOW_PER_SET


def test_the_rule_bounds_the_values_it_maps(monkeypatch):
    # wide k-mers of many features: each width's k-mers per set are cut so that they hold at most
    # WINDOW_MAX_VALUES values (single elements and widths that fit keep WINDOW_PER_SET a set)
    import skset._map_selection as ms

    rng = np.random.default_rng(0)
    y = np.arange(20) % 2
    X = [np.cumsum(rng.normal(size=(300, 6)), 0) for _ in y]
    seen = {}
    real = ms._sampled_rows

    def counted(sets, rng, per_set, window=1, coding="plain", dilation=1):
        out = real(sets, rng, per_set, window, coding, dilation)
        seen[window] = (per_set, out[0].size)
        return out

    budget = 20 * 200 * 6 * 6  # 200 5-mers a set (level + shape: 6 x 6 values each)
    monkeypatch.setattr(ms, "_sampled_rows", counted)
    monkeypatch.setattr(ms, "WINDOW_MAX_VALUES", budget)
    kw = dict(kmer_coding="level_shape", fixed={}, default=ms.DEFAULT_CHOICE, n_components=16,
              eigenvalue_floor=1e-6, rng=np.random.RandomState(0))
    select_window(X, y, **kw)
    assert sorted(seen) == [1, *WINDOW_CANDIDATES]
    assert seen[1][0] == seen[3][0] == ms.WINDOW_PER_SET  # 20 x 256 x 6 and x 24 fit
    assert (seen[5][0], seen[10][0], seen[20][0]) == (200, budget // (20 * 66), budget // (20 * 126))
    assert all(size <= budget for _, size in seen.values())
    # never fewer than 8 a set
    assert ms.kmers_per_set(20, 20, 6, "level_shape", 1000) == 8
    assert ms.kmers_per_set(20, 1, 6, "level_shape", 10**9) == ms.WINDOW_PER_SET


def test_the_width_taken_is_the_best_of_those_that_beat_single_elements(monkeypatch):
    """Of the widths whose per-set errors beat single elements' by more than noise, the one of
    lowest mean error is taken: a width of lower mean error but too noisy to pass the paired test
    does not keep single elements when another width passes it; none passing keeps 1."""
    import skset._map_selection as ms
    from skset._stats import paired_t

    X, y = _order_task()
    widths = window_candidates([len(x) for x in X])
    assert widths == [1, 3, 5, 10, 20]
    rng = np.random.default_rng(0)
    base = 1.0 + 0.1 * rng.normal(size=40)
    spread = rng.normal(size=40)
    noisy = base - 0.10 + 2.0 * (spread - spread.mean())  # the lowest mean, t well under 2
    steady = base - 0.05 + 0.01 * rng.normal(size=40)  # lower by far more than noise
    worse = base + 0.1
    assert noisy.mean() < steady.mean() and paired_t(base, noisy, flat=0.0) < ms.MIN_T
    kw = dict(kmer_coding="level_shape", fixed={}, n_components=16, eigenvalue_floor=1e-6,
              default={"standardize": True, "normalize": False, "keep_norm": True,
                       "bandwidth": 0.5})

    def chosen(errors):
        calls = iter(errors)
        monkeypatch.setattr(ms, "pooled_map_errors", lambda *a, **k: next(calls))
        return select_window(X, y, rng=np.random.RandomState(0), **kw)[0]

    assert chosen([base, noisy, steady, worse, worse]) == 5
    assert chosen([base, steady - 0.01, steady, worse, worse]) == 3  # the best of two that pass
    assert chosen([base, noisy, worse, worse, worse]) == 1  # none passes


def test_a_column_of_labels_chooses_as_the_labels_do():
    # y of shape (n, 1) is one output: the map's width and OTKEmbedding's positions are chosen
    # from it as from y (they were left to their no-label values)
    X, y = _order_task()
    a = NystromFeatures(n_components=8, random_state=0).fit(X, y)
    b = NystromFeatures(n_components=8, random_state=0).fit(X, y[:, None])
    assert a.window_ == b.window_ > 1
    np.testing.assert_array_equal(a.transform(X[:3])[0], b.transform(X[:3])[0])
