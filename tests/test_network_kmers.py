"""The Set Transformer and Deep Sets read k-mers (``window``, ``dilation``): with
``window="auto"`` (the default) chosen from the labels by NystromFeatures' rule where order
matters and kept only when they beat k-mers of the same sets shuffled, single elements on
unordered bags and on exchangeable sets that the rule alone would read as k-mers, explicit
values kept; the exported module reads the same k-mers."""

import numpy as np
import pytest
import torch
from test_window_auto import _bag_task as _bags  # bags of i.i.d. elements: order carries nothing
from test_window_auto import _order_task as _ramps  # rising / falling ramps: order is the class

from skset import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    NystromFeatures,
    OTKClassifier,
    SetTransformerClassifier,
    SetTransformerRegressor,
)
from skset._map_selection import (
    DEFAULT_CHOICE,
    MIN_T_ORDER,
    ORDER_SHUFFLES,
    _targets,
    format_window_scores,
    order_statistic,
    select_window,
    shuffled_kmer_errors,
)
from skset._sets import kmer_level_shape
from skset.datasets import make_normal_var
from skset.neural_network._network_kmers import choose_kmers, read_kmers
from skset.nn.nystrom import DEFAULT_EIGENVALUE_FLOOR, DEFAULT_N_COMPONENTS

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
SMALL = dict(hidden_size=16, n_layers=1, max_iter=15, random_state=0, device="cpu")


@pytest.mark.parametrize("cls", [SetTransformerClassifier, DeepSetsClassifier])
def test_order_takes_kmers_and_bags_keep_elements(cls):
    X, y = _ramps()
    Xt, yt = _ramps(seed=1)
    assert cls().window == "auto"  # the default
    est = cls(**SMALL).fit(X, y)
    assert est.window_ > 1 and est.dilation_ == 1
    assert est.module_ is not None and est.score(Xt, yt) >= 0.9
    single = cls(window=1, **SMALL).fit(X, y)
    assert single.score(Xt, yt) < 0.75  # the same values in another order
    B, yb = _bags()
    bag = cls(**SMALL).fit(B, yb)
    assert (bag.window_, bag.dilation_) == (1, 1)
    # a bag fit keeps single elements: exactly the fit with window=1
    np.testing.assert_allclose(bag.predict_proba(B), cls(window=1, **SMALL).fit(B, yb)
                               .predict_proba(B), atol=1e-6)


def _rule(X, y, seed, order_test):
    return select_window(X, y, kmer_coding="level_shape", fixed={}, default=DEFAULT_CHOICE,
                         n_components=DEFAULT_N_COMPONENTS,
                         eigenvalue_floor=DEFAULT_EIGENVALUE_FLOOR,
                         rng=np.random.RandomState(seed), dilate=True, order_test=order_test)


@pytest.mark.parametrize("seed", [0, 3])
def test_order_test_drops_kmers_of_exchangeable_sets(seed):
    # Normal Var: sets of i.i.d. draws, the target their variance. The rule alone takes k-mers
    # (their shape coding reads the spread), though their order is arbitrary: the k-mers of the
    # same sets shuffled score as well, and the test drops them
    X, y = make_normal_var(100, set_size=50, random_state=seed)
    X, y = [np.asarray(x) for x in X], np.asarray(y, dtype=float)
    assert _rule(X, y, seed, order_test=False)[0] > 1  # the case the test is for
    w, d, scores = _rule(X, y, seed, order_test=True)
    assert (w, d) == (1, 1) and scores[-1][0] == "shuffled"
    assert choose_kmers(SetTransformerRegressor(), X, y, seed) == (1, 1)
    # ramps: the same values in another order are the class; their k-mers beat the shuffled
    R, yr = _ramps()
    kept = _rule(R, yr, seed, order_test=True)
    assert kept[0] > 1 and kept[2][-1][0] == "shuffled" and kept[2][-1][1] < max(
        v for k, v in kept[2][:-1])
    # the test's groups: the sets as given, and ORDER_SHUFFLES shuffled copies, each set by its
    # own permutation; on ramps the sets as given lie far under every copy
    orig, shuffled = shuffled_kmer_errors(
        R, _targets("classification", yr), 5, 1, "level_shape", DEFAULT_CHOICE,
        n_components=DEFAULT_N_COMPONENTS, eigenvalue_floor=DEFAULT_EIGENVALUE_FLOOR,
        rng=np.random.RandomState(seed), dtype=torch.float32)
    assert orig.shape == (len(R),) and shuffled.shape == (ORDER_SHUFFLES, len(R))
    assert orig.mean() < shuffled.mean(1).min() and order_statistic(orig, shuffled) > MIN_T_ORDER


def test_order_test_bounds_its_memory(monkeypatch):
    # wide k-mers of many sets: the k-mers per set are cut so that all groups hold at most
    # ORDER_MAX_VALUES values (never under 8 per set)
    import skset._map_selection as ms

    R, yr = _ramps()
    seen = []
    sampled = ms._sampled_rows

    def counting(*args, **kw):
        out = sampled(*args, **kw)
        seen.append(out[0].size)
        return out

    monkeypatch.setattr(ms, "_sampled_rows", counting)
    monkeypatch.setattr(ms, "ORDER_MAX_VALUES", 6 * len(R) * 6 * 10)  # 10 5-mers per set
    orig, shuffled = shuffled_kmer_errors(
        R, _targets("classification", yr), 5, 1, "level_shape", DEFAULT_CHOICE,
        n_components=DEFAULT_N_COMPONENTS, eigenvalue_floor=DEFAULT_EIGENVALUE_FLOOR,
        rng=np.random.RandomState(0), dtype=torch.float32)
    assert seen == [len(R) * 10 * 6] * (ORDER_SHUFFLES + 1)
    assert np.isfinite(orig).all() and np.isfinite(shuffled).all()


def test_order_statistic():
    # the sets' mean error against the copies' means, in the copies' spread
    copies = np.array([[1.0, 1.2], [1.2, 1.4], [1.0, 1.0]])  # means 1.1, 1.3, 1.0
    sd = np.std([1.1, 1.3, 1.0], ddof=1) * np.sqrt(1 + 1 / 3)
    assert np.isclose(order_statistic(np.array([0.5, 0.7]), copies), (np.mean([1.1, 1.3, 1.0]) - 0.6) / sd)
    assert order_statistic(np.array([1.0, np.nan]), copies) == -np.inf
    assert order_statistic(np.zeros(2), np.ones((3, 2))) == np.inf  # no spread, lower
    assert order_statistic(np.ones(2), np.ones((3, 2))) == -np.inf
    # exchangeable groups: the statistic of each group against the others is centred at 0
    rng = np.random.RandomState(0)
    stats = [order_statistic(g[0], g[1:]) for g in rng.normal(size=(2000, 6, 30))]
    # a Student t of 4 degrees of freedom: 2.0% above 3
    assert abs(np.mean(stats)) < 0.1 and 0.01 < np.mean(np.array(stats) > MIN_T_ORDER) < 0.035


def test_verbose_prints_the_choice(capsys):
    X, y = _ramps()
    est = DeepSetsClassifier(verbose=1, **{**SMALL, "max_iter": 1}).fit(X, y)
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "k-mers" in ln)
    assert line.startswith(f"[DeepSetsClassifier] k-mers: window={est.window_}, dilation=")
    assert "1: " in line and "shuffled: " in line  # single elements' score, the order test's
    # NystromFeatures prints its rule's scores the same way
    ny = NystromFeatures(verbose=1, random_state=0).fit(X, y)
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "k-mer width" in ln)
    assert line.startswith(f"[NystromFeatures] k-mer width: window={ny.window_}, dilation=")
    assert line.endswith(f"(scores {format_window_scores(ny.window_scores_)})")
    assert format_window_scores([(1, -0.5), ((10, 2), -0.25)]) == "1: -0.5000, 10:2: -0.2500"


def test_the_choice_is_nystrom_features_rule_and_explicit_values_are_kept():
    X, y = _ramps()
    X = [x.astype(np.float32) for x in X]  # as both estimators compute
    est = SetTransformerClassifier(window="auto", random_state=0)
    seed, _ = est._start_fit(False)
    w, d = choose_kmers(est, X, y, seed)
    assert w in (3, 5, 10, 20) and d == 1
    # NystromFeatures' rule, from the same random_state: the same width
    assert NystromFeatures(random_state=0).fit(X, y).window_ == w
    assert choose_kmers(SetTransformerClassifier(window=4, dilation=2), X, y, seed) == (4, 2)
    assert choose_kmers(SetTransformerClassifier(window="auto"), X, None, seed) == (1, 1)
    Y = np.column_stack([y, 1 - y])  # multi-label: nothing chosen
    assert choose_kmers(SetTransformerClassifier(window="auto"), X, Y, seed) == (1, 1)
    coded = read_kmers(X, 3, 2)
    np.testing.assert_allclose(coded[0], kmer_level_shape(X[:1], 3, dilation=2)[0])


@pytest.mark.parametrize("cls", [SetTransformerRegressor, DeepSetsRegressor,
                                 SetTransformerClassifier])
def test_explicit_dilated_kmers_fit_predict_and_export(cls):
    from skset.export import export_program, pad_sets

    X, y = _ramps(40)
    target = y.astype(float) if "Regressor" in cls.__name__ else y
    est = cls(window=3, dilation=4, **SMALL).fit(X, target)
    assert est.module_ is not None and (est.window_, est.dilation_) == (3, 4)
    assert est._in_features == 4  # coded 3-mers of one feature: (3 + 1) * 1 values
    batch = X[:4] + [X[4][:5]]  # span 9: the short set has one k-mer
    x, m = pad_sets(batch, n_max=45)
    out = export_program(est).module()(torch.as_tensor(x), torch.as_tensor(m))
    ref = est.predict(batch) if "Regressor" in cls.__name__ else est.decision_function(batch)
    np.testing.assert_allclose(out[0].detach().numpy(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls", [DeepSetsClassifier, SetTransformerClassifier, OTKClassifier])
def test_a_set_shorter_than_the_chosen_kmers_is_one_kmer(cls):
    # the width was chosen on long training sets: a shorter test set is read as one k-mer, its
    # last element repeated, as the same set padded to the width that way
    X, y = _ramps()
    kw = SMALL if cls is not OTKClassifier else dict(n_components=8, n_supports=3, max_iter=2,
                                                     random_state=0, device="cpu")
    est = cls(**kw).fit(X, y)
    w = est.window_
    assert w > 1
    for n in (1, 2, w - 1):
        short = X[3][:n]
        padded = short[np.minimum(np.arange(w), n - 1)]
        got = est.predict_proba([X[0], short, padded])
        np.testing.assert_allclose(got[1], got[2], rtol=1e-6, atol=1e-7)


def test_a_fresh_fit_chooses_again():
    X, y = _ramps()
    est = DeepSetsClassifier(window="auto", **SMALL).fit(X, y)
    assert est.window_ > 1
    B, yb = _bags()
    short = [b[:2] for b in B]  # shorter than the first fit's window: a fresh fit checks them
    assert est.fit(short, yb).window_ == 1
    with pytest.raises(ValueError, match="window"):
        DeepSetsClassifier(window=5, **SMALL).fit(short, yb)


@pytest.mark.parametrize("cls", [DeepSetsClassifier, OTKClassifier, NystromFeatures])
def test_a_later_partial_fit_reads_short_sets_as_predict_does(cls):
    # the first call refuses sets shorter than a given window; later calls, like predict, read
    # them as one k-mer
    X, y = _ramps()
    kw = dict(window=5, dilation=1, random_state=0)
    kw.update(dict(hidden_size=16, n_layers=1, device="cpu") if cls is DeepSetsClassifier else
              dict(n_components=8) if cls is NystromFeatures else
              dict(n_components=8, n_supports=3, device="cpu"))
    est = cls(**kw)
    short = [x[:3] for x in X]
    first = dict(classes=[0, 1]) if cls is not NystromFeatures else {}
    with pytest.raises(ValueError, match="set 0 has 3"):
        est.partial_fit(short, y, **first)
    est.partial_fit(X, y, **first)
    est.partial_fit(short, y)
    assert est.window_ == 5


def test_the_choice_reads_the_targets_as_the_estimator_does():
    # a regressor's whole-number targets are real numbers (type_of_target called them classes of
    # one set each: no labels, single elements); a (n, 1) target is one output; sets of weight 0
    # take no part in the choice nor in the check of an explicit window
    X, y = _ramps()
    signed = np.where(y == 1, 100.0, -100.0) + np.arange(len(y))  # distinct whole numbers
    cases = [(DeepSetsRegressor, signed), (DeepSetsRegressor, signed[:, None]),
             (DeepSetsClassifier, y[:, None])]
    for cls, target in cases:
        w, _ = choose_kmers(cls(**SMALL), X, target, seed=0)
        assert w > 1, (cls.__name__, target.shape)
    B, yb = _bags()
    R = [np.repeat(x, 3, axis=1) for x in X]  # ramps of the bags' width: order decides
    assert choose_kmers(DeepSetsClassifier(**SMALL), R, y, seed=0)[0] > 1
    alone = choose_kmers(DeepSetsClassifier(**SMALL), B, yb, seed=0)
    both = choose_kmers(DeepSetsClassifier(**SMALL), B + R, np.concatenate([yb, y]), seed=0,
                        sample_weight=np.r_[np.ones(len(B)), np.zeros(len(R))])
    assert alone == both == (1, 1)
    # single elements have no dilation, whatever dilation was given
    est = DeepSetsClassifier(dilation=4, **{**SMALL, "max_iter": 1}).fit(B, yb)
    nys = NystromFeatures(n_components=8, dilation=4, random_state=0).fit(B, yb)
    assert (est.window_, est.dilation_) == (nys.window_, nys.dilation_) == (1, 1)
    short = [x[:2] for x in R[:3]]  # shorter than the window, of weight 0
    est = DeepSetsClassifier(window=3, **{**SMALL, "max_iter": 1})
    est.fit(B + short, np.r_[yb, [0, 1, 0]], sample_weight=np.r_[np.ones(len(B)), np.zeros(3)])
    assert est.window_ == 3


def test_a_refit_that_fails_leaves_the_fitted_network():
    """The refit refused for its window leaves the network, its ``window_`` and its predictions
    as they were (it read single elements through a k-mer network before the refits were
    undone; then it was left unfitted)."""
    X, y = _ramps()
    est = SetTransformerClassifier(**{**SMALL, "max_iter": 1}).fit(X, y)
    expected, window = est.predict_proba(X), est.window_
    with pytest.raises(ValueError, match="fewer than the k-mer window"):
        est.set_params(window=500).fit(X, y)
    assert est.window_ == window
    np.testing.assert_array_equal(est.predict_proba(X), expected)


def test_kmer_choice_reads_sparse_labels_and_names_the_short_set_in_x():
    """A sparse multi-label ``y`` with ``sample_weight`` or early stopping (``len()`` of a 0-d
    object array before); a set shorter than an explicit window named by its index in ``X``,
    not among the sets of positive weight (set 4, or 3, for set 5)."""
    from scipy import sparse

    from skset import DeepSetsClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(6, 1)) for _ in range(12)]
    Y = np.column_stack([np.arange(12) % 2, np.arange(12) % 3 == 0]).astype(int)
    w = np.ones(12)
    w[0] = 0.0
    kw = {"hidden_size": 2, "max_iter": 1, "device": "cpu", "random_state": 0}
    for extra, fit_kw in (({}, {"sample_weight": w}), ({"early_stopping": True}, {})):
        est = DeepSetsClassifier(**kw, **extra).fit(X, sparse.csr_matrix(Y), **fit_kw)
        assert est.predict(X).shape == (12, 2)
    X[5] = X[5][:3]
    for extra, fit_kw in (({}, {"sample_weight": w}),
                          ({"early_stopping": True, "validation_fraction": 0.25}, {})):
        with pytest.raises(ValueError, match="set 5 has 3 elements"):
            DeepSetsClassifier(**kw, window=5, **extra).fit(X, Y[:, 0], **fit_kw)
