"""Dilated k-mers (``NystromFeatures(dilation=...)``): elements ``dilation`` steps apart, against
naive loops; the padded-tensor gather and the layer against the estimator; the ``"auto"`` rule
that takes a dilated pair only by a clear margin over the width, on fixed per-set errors."""

import numpy as np
import pytest
import torch

import skset._map_selection as ms
from skset import NystromFeatures
from skset._sets import check_kmer_lengths, kmer_index, kmer_level_shape, kmer_windows, pack
from skset._weighting import kmer_weights
from skset.nn import NystromLayer
from skset.nn.nystrom import kmer_unfold

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
MAP = dict(bandwidth=0.5, standardize=True, normalize=False, keep_norm=True)


def _naive(s, window, dilation):
    """The k-mers of one set by a loop: a set shorter than the span has one, its last element
    repeated."""
    n = len(s)
    m = max(n - (window - 1) * dilation, 1)
    return np.stack([np.concatenate([s[min(i + j * dilation, n - 1)] for j in range(window)])
                     for i in range(m)])


def _sets(seed=0, sizes=(5, 9, 3, 12, 1, 30)):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, 2)) for n in sizes]


@pytest.mark.parametrize("window,dilation", [(3, 1), (3, 4), (2, 7), (5, 2)])
def test_kmer_windows_match_a_loop(window, dilation):
    sets = [s for s in _sets() if dilation > 1 or len(s) >= window]
    for s, out in zip(sets, kmer_windows(sets, window, dilation=dilation)):
        np.testing.assert_array_equal(out, _naive(s, window, dilation))
    index, n_out = kmer_index([len(s) for s in sets], window, dilation)
    assert index.shape == (n_out.sum(), window)


def test_a_set_shorter_than_a_kmer_is_one_kmer_its_last_element_repeated():
    # contiguous as dilated: set 2 has 3 elements
    s = _sets()[2]
    for dilation in (1, 2):
        (one,) = kmer_windows(_sets(), 4, dilation=dilation)[2]
        np.testing.assert_array_equal(one, s[[0, 1, 2, 2]].reshape(-1) if dilation == 1
                                      else s[[0, 2, 2, 2]].reshape(-1))
    # a fit refuses an explicit contiguous window its training sets cannot hold
    with pytest.raises(ValueError, match="set 2 has 3 elements, fewer than the k-mer window"):
        check_kmer_lengths([5, 6, 3], 4)


def test_kmer_weights_are_the_mean_over_the_dilated_elements():
    w = [np.arange(1.0, 11.0)]
    got = kmer_weights(w, 3, dilation=4)[0]
    np.testing.assert_allclose(got, [(1 + 5 + 9) / 3, (2 + 6 + 10) / 3])


@pytest.mark.parametrize("window,dilation", [(3, 4), (2, 7), (4, 1), (3, 1)])
def test_padded_unfold_matches_the_sets(window, dilation):
    sets = _sets()
    X, M = pack(sets, dtype=torch.float64, device="cpu")
    X[~M] = float("nan")  # padding never enters a real k-mer
    xw, mw = kmer_unfold(X, M, window, dilation)
    for b, ref in enumerate(kmer_windows(sets, window, dilation=dilation)):
        np.testing.assert_array_equal(xw[b][mw[b]].numpy(), ref)
    # a batch of sets all shorter than the span: one k-mer each
    X, M = pack([s[:2] for s in sets], dtype=torch.float64, device="cpu")
    assert kmer_unfold(X, M, window, dilation)[1].sum(1).tolist() == [1] * len(sets)


def _series(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return [np.cumsum(rng.normal(size=(int(rng.integers(8, 60)), 2)), 0) for _ in range(n)]


@pytest.mark.parametrize("coding", ["level_shape", "plain"])
def test_estimator_is_the_map_of_its_dilated_kmers(coding):
    """``window=3, dilation=5`` maps the k-mers of a loop: coded k-mers fitted as single
    elements give the same anchors and features; the layer of ``to_module`` gives them on padded
    batches, sets shorter than the span included."""
    X = _series()
    nf = NystromFeatures(n_components=8, window=3, dilation=5, kmer_coding=coding,
                         random_state=0, **MAP).fit(X)
    assert (nf.window_, nf.dilation_) == (3, 5)
    out = nf.transform(X)
    assert [len(o) for o in out] == [max(len(x) - 10, 1) for x in X]
    if coding == "level_shape":
        coded = kmer_level_shape(X, 3, dilation=5)
        ref = NystromFeatures(n_components=8, window=1, random_state=0, **MAP).fit(coded)
        np.testing.assert_allclose(nf.anchors_, ref.anchors_)
        for a, b in zip(out, ref.transform(coded)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    layer = nf.to_module()
    assert isinstance(layer, NystromLayer) and layer.dilation == 5
    x, m = pack(X, dtype=torch.float32, device="cpu")
    feats, mask = layer(x, m)
    for b, ref in enumerate(out):
        np.testing.assert_allclose(feats[b][mask[b]].detach().numpy(), ref, rtol=1e-4, atol=1e-5)


def test_export_program_reads_dilated_kmers():
    from skset.export import export_program, pad_sets

    X = _series()
    nf = NystromFeatures(n_components=8, window=3, dilation=4, random_state=0).fit(X)
    batch = X[:5] + [X[5][:3]]  # a set shorter than the span (9)
    x, m = pad_sets(batch, n_max=max(len(s) for s in batch) + 2)
    feats, mask = export_program(nf).module()(torch.as_tensor(x), torch.as_tensor(m))
    for i, ref in enumerate(nf.transform(batch)):
        np.testing.assert_allclose(feats[i][mask[i]].detach().numpy(), ref, rtol=1e-4, atol=1e-5)


def test_dilation_auto_is_one_with_an_explicit_window_and_warm_fits_keep_it():
    X = _series()
    y = np.arange(len(X)) % 2
    assert NystromFeatures(n_components=8, window=3, random_state=0).fit(X, y).dilation_ == 1
    nf = NystromFeatures(n_components=8, window=3, dilation=2, random_state=0).fit(X)
    nf.partial_fit(X[:10])  # the same k-mers: continues
    nf.set_params(dilation=3)
    with pytest.raises(ValueError, match="dilation=2"):
        nf.partial_fit(X[:10])
    with pytest.raises(ValueError, match="dilation"):
        NystromFeatures(dilation=0).fit(X)


def test_the_rule_takes_a_dilated_pair_only_by_a_clear_margin(monkeypatch):
    """Dilated pairs are scored after the widths, on the same sampled sets; one replaces the
    width taken only when its paired t over the width's errors is above ``MIN_T_DILATED`` (a t
    between ``MIN_T`` and it keeps the width), the best of those that do."""
    from skset._stats import paired_t

    X = [np.arange(200.0)[:, None] for _ in range(40)]
    y = np.arange(40) % 2
    widths = ms.window_candidates([200] * 40)
    pairs = ms.dilated_candidates([200] * 40)
    assert pairs == [p for p in ms.DILATED_CANDIDATES if (p[0] - 1) * p[1] + 1 <= 133]
    rng = np.random.default_rng(0)
    base = 1.0 + 0.1 * rng.normal(size=40)
    width_err = base - 0.2 + 0.01 * rng.normal(size=40)  # 5-mers: far better than elements
    noise = rng.normal(size=40)
    noise = (noise - noise.mean()) / noise.std(ddof=1)

    def with_t(t):  # errors whose paired t over width_err is exactly t
        return width_err - t * 0.05 / np.sqrt(40) - 0.05 * noise

    assert paired_t(width_err, with_t(2.5), flat=0.0) == pytest.approx(2.5)
    worse = base + 0.1
    kw = dict(kmer_coding="level_shape", fixed={}, n_components=16, eigenvalue_floor=1e-6,
              default=MAP)

    def chosen(dilated, dilate=True):
        calls = iter([base, worse, width_err, worse, worse, *dilated])
        monkeypatch.setattr(ms, "pooled_map_errors", lambda *a, **k: next(calls))
        w, d, scores = ms.select_window(X, y, rng=np.random.RandomState(0), dilate=dilate, **kw)
        return (w, d), [s[0] for s in scores]

    rest = [worse] * (len(pairs) - 2)
    got, scored = chosen([with_t(2.5), with_t(3.5), *rest])
    assert got == pairs[1] and scored == widths + pairs
    assert chosen([with_t(2.5), with_t(2.9), *rest])[0] == (5, 1)  # above MIN_T, not above 3
    assert chosen([with_t(4.0), with_t(3.5), *rest])[0] == pairs[0]  # the lowest mean error
    got, scored = chosen([], dilate=False)
    assert got == (5, 1) and scored == widths


def _lag16_series(n_sets=60, seed=0):
    """Series of 34-39 steps whose class is the sign of the link between steps 16 apart: every
    window of at most ten consecutive steps, and every step alone, has one law in both classes."""
    rng = np.random.default_rng(seed)
    y = np.arange(n_sets) % 2
    X = []
    for c in y:
        x = rng.normal(size=int(rng.integers(34, 40)))
        x[16:] = (1 - 2 * c) * 0.9 * x[:-16] + 0.1 * x[16:]
        X.append(x[:, None])
    return X, y


@pytest.mark.parametrize("seed", [0, 1])
def test_dilated_kmers_are_taken_where_no_contiguous_width_passes(seed, monkeypatch):
    """Order that only dilated k-mers see (a link between steps 16 apart; no contiguous width
    above 10 fits these sets twice): the pairs are scored against single elements and 10-mers
    of dilation 2 taken, after the order test (on ``ORDER_SHUFFLES_PAIRS`` shuffled copies);
    the same sets with their steps shuffled keep single elements; the set networks' rule
    scores pairs only once a contiguous width is taken, and keeps single elements here."""
    import skset._map_selection as ms
    from skset import DeepSetsClassifier
    from skset.neural_network._network_kmers import choose_kmers

    copies, test = [], ms.shuffled_kmer_errors

    def spy(*args, **kwargs):
        out = test(*args, **kwargs)
        copies.append(len(out[1]))
        return out

    monkeypatch.setattr(ms, "shuffled_kmer_errors", spy)
    X, y = _lag16_series(seed=seed)
    ny = NystromFeatures(random_state=seed).fit(X, y)
    assert (ny.window_, ny.dilation_) == (10, 2) and copies == [ms.ORDER_SHUFFLES_PAIRS] != [5]
    scored = dict(ny.window_scores_)
    assert scored[(10, 2)] > max(scored[w] for w in (1, 3, 5, 10)) and "shuffled" in scored
    assert choose_kmers(DeepSetsClassifier(), X, y, seed) == (1, 1)
    rng = np.random.default_rng(seed)
    shuffled = [x[rng.permutation(len(x))] for x in X]
    assert NystromFeatures(random_state=seed).fit(shuffled, y).window_ == 1
    assert NystromFeatures(random_state=seed, dilation=1).fit(X, y).window_ == 1  # explicit


def test_one_set_too_short_for_any_width_leaves_the_dilated_pairs_scored():
    """A set of 5 steps among series of 34-39: no contiguous width fits every set twice, and the
    dilated pairs, which fit the median length, are still scored against single elements (the
    rule returned single elements unscored before)."""
    X, y = _lag16_series(seed=0)
    X, y = X + [X[0][:5]], np.append(y, y[0])
    ny = NystromFeatures(random_state=0).fit(X, y)
    assert ms.window_candidates([len(x) for x in X]) == [1]
    assert (ny.window_, ny.dilation_) == (10, 2)
    assert [k for k, _ in ny.window_scores_] == [1, (10, 2), "shuffled"]
    X[:-1] = [x[np.random.default_rng(i).permutation(len(x))] for i, x in enumerate(X[:-1])]
    assert NystromFeatures(random_state=0).fit(X, y).window_ == 1  # order shuffled away


def test_supervised_otk_reads_dilated_kmers_in_training_and_export():
    """``OTKClassifier(window=3, dilation=4)``: the network's layer holds the dilation, the
    exported program gives the estimator's decision values, sets shorter than the span
    included."""
    from skset import OTKClassifier
    from skset.export import export_program, pad_sets

    X = _series(30)
    y = np.array([int(x[-1, 0] > x[0, 0]) for x in X])
    clf = OTKClassifier(n_components=6, n_supports=2, window=3, dilation=4, max_iter=2,
                        random_state=0, device="cpu").fit(X, y)
    assert (clf.window_, clf.dilation_) == (3, 4)
    assert clf.module_.element_map.dilation == 4 and clf.module_.dilation == 4
    batch = X[:4] + [X[4][:5]]  # span 9: the last set has one k-mer
    x, m = pad_sets(batch, n_max=max(len(s) for s in batch) + 2)
    out = export_program(clf).module()(torch.as_tensor(x), torch.as_tensor(m))
    np.testing.assert_allclose(out[0].detach().numpy(), clf.decision_function(batch), rtol=1e-4,
                               atol=1e-5)


def test_an_explicit_dilation_with_window_auto_scores_the_widths_dilated(monkeypatch):
    """``window="auto", dilation=4``: the widths are scored as k-mers 4 apart (whose span is at
    most 2/3 of the median length), not contiguous, and the width chosen is read with that
    dilation; the networks' rule likewise."""
    from skset import DeepSetsClassifier

    rng = np.random.default_rng(0)
    X = [np.cumsum(rng.normal(size=(30, 1)), 0) for _ in range(40)]
    y = np.arange(40) % 2
    seen = []
    real = ms._sampled_rows

    def spy(sets, rng_, per_set=ms.MAX_PER_SET, w=1, coding="plain", dilation=1):
        seen.append((w, dilation))
        return real(sets, rng_, per_set, w, coding, dilation)

    monkeypatch.setattr(ms, "_sampled_rows", spy)
    nf = NystromFeatures(n_components=8, dilation=4, random_state=0).fit(X, y)
    # (the map rule then reads the width chosen); 10-mers 4 apart span 37: more than 2/3 of 30
    assert seen[:3] == [(1, 1), (3, 4), (5, 4)] and not [s for s in seen
                                                         if s[0] > 1 and s[1] != 4]
    assert [w for w, _ in nf.window_scores_] == [1, (3, 4), (5, 4)]
    assert nf.dilation_ == (4 if nf.window_ > 1 else 1)
    seen.clear()
    DeepSetsClassifier(dilation=4, max_iter=1, random_state=0).fit(X, y)
    assert seen[:3] == [(1, 1), (3, 4), (5, 4)]
    seen.clear()
    NystromFeatures(n_components=8, random_state=0).fit(X, y)  # contiguous: 3, 5, 10-mers
    assert seen[:4] == [(1, 1), (3, 1), (5, 1), (10, 1)]


def test_the_map_rule_scores_plain_kmers_as_dilated_as_the_map_reads_them(monkeypatch):
    # plain k-mers (not coded): the standardisation, sphere and bandwidth were once scored on
    # contiguous k-mers whatever the dilation
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(60, 1)).cumsum(0) for _ in range(30)]
    y = np.arange(30) % 2
    seen, real = [], ms.kmer_windows

    def spy(sets, window, dilation=1):
        seen.append((window, dilation))
        return real(sets, window, dilation=dilation)

    monkeypatch.setattr(ms, "kmer_windows", spy)
    scores = {}
    for d in (1, 8):
        seen.clear()
        nf = NystromFeatures(n_components=8, window=5, dilation=d, kmer_coding="plain",
                             random_state=0).fit(X, y)
        assert seen == [(5, d)] and nf.dilation_ == d
        scores[d] = [s for _, s in nf.selection_scores_]
    assert scores[1] != scores[8]


def test_an_explicit_dilation_keeps_its_widths_beside_one_short_set():
    """The widths an explicit dilation is scored with fit the median length as the dilated
    pairs do (a shorter set has one k-mer): one short training set does not take them away."""
    assert ms.window_candidates([300] * 60 + [40], 16) == [1, 3, 5, 10]  # spans 33, 65, 145
    assert ms.window_candidates([300] * 60 + [40], 1) == [1, 3, 5, 10, 20]
    assert ms.window_candidates([30] * 5, 4) == [1, 3, 5]  # spans 9, 17 (37: over 20)
    assert ms.window_candidates([], 4) == [1]


@pytest.mark.parametrize("dilation", [1, 3])
def test_level_shape_in_runs_of_sets_is_the_coding_set_by_set(dilation):
    # coded in runs of about 2,048 k-mers: sets across several runs, short and long, give each
    # set's own coding to the bit (float64, whatever the sets' dtype)
    from skset._sets import code_kmers

    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(int(n), 2)).astype(np.float32) for n in rng.integers(1, 60, 400)]
    sets += [rng.normal(size=(3000, 2)).astype(np.float32), sets[0]]
    coded = kmer_level_shape(sets, 4, dilation=dilation)
    assert len(coded) == len(sets)
    for s, c in zip(sets, coded):
        steps = _naive(s, 4, dilation).reshape(-1, 4, 2)
        assert c.dtype == np.float64
        np.testing.assert_array_equal(c, code_kmers(steps.astype(np.float64), "level_shape"))
