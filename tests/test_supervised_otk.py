"""OTKClassifier / OTKRegressor: supervised end-to-end OTK."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import LogisticRegression

from skset import OTKClassifier, OTKRegressor
from skset._map_selection import DEFAULT_CHOICE
from skset.datasets import make_motif_order
from skset.neural_network._otk import PAPER_MAP, _OTKNetwork
from skset.nn import NystromLayer, OTKLayer

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SMALL = dict(n_components=8, window=3, n_supports=3, position_sigma=0.5, max_iter=3, device="cpu")


@pytest.fixture(scope="module")
def motif_data():
    X, y = make_motif_order(n_samples=60, min_length=20, max_length=40, motif_length=3,
                            random_state=0)
    return X, y


def _sets(rng, n, d=3, lo=4, hi=12):
    return [rng.normal(size=(int(k), d)) for k in rng.integers(lo, hi, size=n)]


# -- the model starts from the unsupervised pipeline, then learns --
def test_initialisation_is_the_unsupervised_pipeline(motif_data):
    X, y = motif_data
    # a vanishing learning rate: the network stays at its initialisation (the adam solver: its
    # first head is solved from zero to its tolerance, where the alternating solver refits it)
    clf = OTKClassifier(**{**SMALL, "max_iter": 1}, solver="adam", learning_rate_init=1e-12,
                        alpha=1e-2, random_state=0).fit(X, y)
    feats = clf.embedding_.transform(clf.nystrom_.transform(X))
    np.testing.assert_allclose(clf.transform(X), feats, rtol=1e-4, atol=1e-4)
    # the head is the L2-regularised logistic regression on those features (C = 1 / (alpha n))
    # (binary: softmax over two rows halves the penalty on their difference, hence C * 2)
    lr = LogisticRegression(C=2 / (1e-2 * len(X)), tol=1e-10, max_iter=10_000).fit(feats, y)
    # (to 3e-3: the head's solve stops at a tolerance on its gradient)
    np.testing.assert_allclose(clf.predict_proba(X), lr.predict_proba(feats), atol=3e-3)


def test_supervised_beats_its_unsupervised_initialisation():
    # order of two motifs decides the class; few anchors, so the unsupervised k-means anchors
    # describe the background and the motifs poorly: training must move them
    X, y = make_motif_order(n_samples=400, min_length=150, max_length=300, motif_length=6,
                            mutation_rate=0.1, random_state=1)
    Xtr, ytr, Xte, yte = X[:200], y[:200], X[200:], y[200:]
    # two seeds (the gain varies with the k-means starts: 0.09 to 0.29 over random_state 0-4)
    gains = []
    for seed in (0, 1):
        clf = OTKClassifier(n_components=16, window=6, n_supports=4, position_sigma=0.3,
                            max_iter=8, random_state=seed, device="cpu").fit(Xtr, ytr)
        ftr = clf.embedding_.transform(clf.nystrom_.transform(Xtr))
        fte = clf.embedding_.transform(clf.nystrom_.transform(Xte))
        unsup = LogisticRegression(C=1 / (clf.alpha_ * len(Xtr)), max_iter=5000).fit(ftr, ytr)
        acc_unsup = unsup.score(fte, yte)
        acc_sup = clf.score(Xte, yte)
        assert acc_sup > acc_unsup, (seed, acc_sup, acc_unsup)
        gains.append(acc_sup - acc_unsup)
    assert np.mean(gains) >= 0.1, gains
    # anchors and references moved away from their initialisation
    assert not np.allclose(clf.module_.nystrom.anchors.detach().numpy(), clf.nystrom_.anchors_)
    assert not np.allclose(clf.module_.otk.references.detach().numpy(),
                           clf.embedding_.references_)


@pytest.mark.parametrize("solver", ["alternating", "adam"])
def test_gradients_reach_anchors_and_references(motif_data, solver):
    X, y = motif_data
    clf = OTKClassifier(**SMALL, solver=solver, random_state=0).fit(X, y)
    m = clf.module_
    assert all(p.requires_grad for p in m.parameters())
    from skset._sets import pack

    Xb, Mb = pack(X[:5])
    loss = torch.nn.functional.cross_entropy(m(Xb, Mb), torch.as_tensor(y[:5]))
    loss.backward()
    assert m.nystrom.anchors.grad.abs().sum() > 0
    assert m.otk.references.grad.abs().sum() > 0
    assert len(clf.loss_curve_) == clf.n_iter_ == 3


def test_network_gradcheck_small_doubles():
    torch.manual_seed(0)
    nys = NystromLayer(2, 3, window=2).double()
    otk = OTKLayer(3, 2, epsilon=0.5, sinkhorn_iter=4, position_sigma=0.5).double()
    net = _OTKNetwork(nys, otk, 2, torch.zeros(6, dtype=torch.float64), True, 2).double()
    X = torch.randn(2, 5, 2, dtype=torch.float64)
    M = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    a0 = nys.anchors.detach().clone().requires_grad_()
    r0 = otk.references.detach().clone().requires_grad_()

    def f(a, r):
        return torch.func.functional_call(net, {"element_map.anchors": a, "otk.references": r},
                                          (X, M))

    assert torch.autograd.gradcheck(f, (a0, r0), fast_mode=True)


class _ElementLinear(torch.nn.Module):
    """An element map that is neither Nystrom nor k-mers: a linear map of each element."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.linear = torch.nn.Linear(d_in, d_out, dtype=torch.float64)

    def forward(self, x, mask):
        return self.linear(x) * mask.unsqueeze(-1), mask


def test_network_takes_any_element_map():
    """_OTKNetwork runs any (x, mask) -> (x', mask') module: its embedding is OTKLayer's on the
    mapped elements (a naive reference), gradients reach the map, a set's embedding does not
    depend on its padding, and export holds a copy of the map (no for_export of its own)."""
    from skset._serving import for_export

    torch.manual_seed(0)
    emap = _ElementLinear(2, 3)
    otk = OTKLayer(3, 2, epsilon=0.5, sinkhorn_iter=5).double()
    center = torch.randn(6, dtype=torch.float64)
    net = _OTKNetwork(emap, otk, 1, center, True, 2)
    X = torch.randn(2, 5, 2, dtype=torch.float64)
    M = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    z = net.embed(X, M)
    for b, n in enumerate((5, 3)):
        raw = otk(emap.linear(X[b:b + 1, :n]), None).flatten(1) - center
        ref = raw * (6 ** 0.5 / raw.norm())
        torch.testing.assert_close(z[b:b + 1], ref, rtol=1e-12, atol=1e-12)
    net(X, M).sum().backward()
    assert emap.linear.weight.grad.abs().sum() > 0
    assert net.nystrom is None
    copy = for_export(emap)
    assert copy is not emap and torch.equal(copy(X, M)[0], emap(X, M)[0])


def test_nystrom_for_export_is_a_copy_with_a_fixed_normalization():
    """NystromLayer.for_export builds a new layer (the original is untouched) computing the same
    map, with kappa(w, w)^{-1/2} a buffer that no longer follows the anchors."""
    torch.manual_seed(0)
    layer = NystromLayer(2, 4, window=2, normalize=True).double()
    layer.mean.fill_(0.3)
    layer.scale.fill_(2.0)
    X = torch.randn(3, 6, 2, dtype=torch.float64)
    M = torch.arange(6) < torch.tensor([[6], [4], [2]])
    frozen = layer.for_export()
    assert type(layer) is NystromLayer and not hasattr(layer, "frozen_normalization")
    assert isinstance(frozen, NystromLayer) and frozen is not layer
    with torch.no_grad():  # the kernels' inference path in both
        out, out_mask = frozen(X, M)
        ref, ref_mask = layer(X, M)
    assert torch.equal(out, ref) and torch.equal(out_mask, ref_mask)
    with torch.no_grad():
        frozen.anchors.add_(1.0)
    torch.testing.assert_close(frozen.normalization(), layer.normalization())


@pytest.mark.parametrize("n_components", [4, None])
def test_network_saved_with_the_old_map_name_loads(n_components):
    """Networks saved or pickled when the element map was the attribute `nystrom` (None without
    Nystrom) load into the element map and give the same outputs."""
    rng = np.random.default_rng(0)
    X, y = _sets(rng, 30), np.arange(30) % 2
    clf = OTKClassifier(n_components=n_components, n_supports=3, max_iter=1, random_state=0,
                        device="cpu").fit(X, y)
    net = clf.module_
    state = {k.replace("element_map.", "nystrom."): v for k, v in net.state_dict().items()}
    rebuilt = clf._untrained_module()
    rebuilt.load_state_dict(state, strict=True)
    Xp = torch.as_tensor(np.stack([s[:5] for s in X[:4]]), dtype=torch.float32)
    Mp = torch.ones(4, 5, dtype=torch.bool)
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(Xp, Mp), net(Xp, Mp), rtol=0, atol=0)
    old = pickle.loads(pickle.dumps(net))  # the old layout: _modules["nystrom"]
    emap = old._modules.pop("element_map")
    old._modules["nystrom"] = emap if n_components else None
    restored = pickle.loads(pickle.dumps(old))
    assert "nystrom" not in restored._modules
    with torch.no_grad():
        torch.testing.assert_close(restored(Xp, Mp), net(Xp, Mp), rtol=0, atol=0)


# -- sklearn contract --
def test_determinism_and_random_state(motif_data):
    X, y = motif_data
    p1 = OTKClassifier(**SMALL, random_state=3).fit(X, y).predict_proba(X)
    p2 = OTKClassifier(**SMALL, random_state=3).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(p1, p2)
    p3 = OTKClassifier(**SMALL, random_state=4).fit(X, y).predict_proba(X)
    assert not np.allclose(p1, p3)
    # the global torch RNG is left alone
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    OTKClassifier(**SMALL, random_state=3).fit(X, y)
    assert torch.equal(torch.rand(1), before)


def test_pickle_clone_and_padding_invariance(motif_data):
    X, y = motif_data
    clf = OTKClassifier(**SMALL, random_state=0).fit(X, y)
    clf2 = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clf.predict_proba(X), clf2.predict_proba(X))
    np.testing.assert_array_equal(clf.transform(X), clf2.transform(X))
    c = clone(clf)
    assert c.get_params() == clf.get_params() and not hasattr(c, "module_")
    # a set alone gives the same output as inside a batch with a much longer set
    short = X[0][:10]
    long = np.tile(X[1], (4, 1))
    alone = clf.predict_proba([short])
    together = clf.predict_proba([short, long])
    np.testing.assert_allclose(alone[0], together[0], rtol=1e-5, atol=1e-6)
    # inputs are not modified
    X_copy = [s.copy() for s in X]
    clf.predict(X)
    assert all(np.array_equal(a, b) for a, b in zip(X, X_copy, strict=True))


def test_an_interrupted_refit_keeps_the_model_before(motif_data, monkeypatch):
    """A refit stopped by ``KeyboardInterrupt`` after it dropped the old network (here in its
    first head solve) leaves the fitted model as it was: it had kept ``classes_`` without
    ``module_``, and ``predict`` said the model was not fitted."""
    from skset.neural_network._otk import _BaseSupervisedOTK

    X, y = motif_data
    clf = OTKClassifier(**SMALL, random_state=0).fit(X, y)
    before, proba = dict(vars(clf)), clf.predict_proba(X)

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_BaseSupervisedOTK, "_refit_head", interrupted)
    with pytest.raises(KeyboardInterrupt):
        clf.fit(X, y)
    assert vars(clf).keys() == before.keys() and all(vars(clf)[k] is v for k, v in before.items())
    np.testing.assert_array_equal(clf.predict_proba(X), proba)


def test_predict_proba_and_string_labels(motif_data):
    X, y = motif_data
    labels = np.array(["first", "second"])[y]
    clf = OTKClassifier(**SMALL, random_state=0).fit(X, labels)
    assert clf.classes_.tolist() == ["first", "second"]
    proba = clf.predict_proba(X)
    assert proba.shape == (len(X), 2)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
    pred = clf.predict(X)
    assert set(pred) <= {"first", "second"}
    np.testing.assert_array_equal(pred, clf.classes_[proba.argmax(1)])
    assert 0.0 <= clf.score(X, labels) <= 1.0
    dec = clf.decision_function(X)  # scikit-learn's binary shape: the score of classes_[1]
    assert dec.shape == (len(X),)
    np.testing.assert_array_equal(pred, clf.classes_[(dec > 0).astype(int)])
    emb = clf.transform(X)
    assert emb.shape == (len(X), 3 * 8) and emb.dtype == np.float32
    assert len(clf.get_feature_names_out()) == emb.shape[1]


def test_three_classes_without_nystrom_and_early_stopping():
    rng = np.random.default_rng(0)
    X = _sets(rng, 90)
    y = rng.integers(0, 3, size=90)
    X = [s + 1.5 * np.eye(3)[c] for s, c in zip(X, y, strict=True)]  # class shifts one feature
    clf = OTKClassifier(n_components=None, n_supports=4, max_iter=4, early_stopping=True,
                        validation_fraction=0.2, n_iter_no_change=2, random_state=0,
                        device="cpu").fit(X, y)
    assert clf.nystrom_ is None and clf.module_.nystrom is None
    assert len(clf.validation_scores_) == clf.n_iter_ >= 1
    assert clf.best_validation_score_ == max(clf.validation_scores_)
    assert clf.score(X, y) > 0.8
    assert clf.predict_proba(X).shape == (90, 3)


def test_warm_start_continues_and_learning_rate_halving(motif_data):
    X, y = motif_data
    clf = OTKClassifier(**{**SMALL, "max_iter": 2}, warm_start=True, random_state=0).fit(X, y)
    anchors_after_2 = clf.module_.nystrom.anchors.detach().clone()
    clf.fit(X, y)
    assert clf.n_iter_ == 4 and len(clf.loss_curve_) == 4
    assert not torch.equal(anchors_after_2, clf.module_.nystrom.anchors.detach())
    # adaptive learning rate: halved after 5 epochs without a relative decrease above tol (a tiny
    # lr never improves; float32 noise moves the loss by ~1e-8, below tol)
    clf = OTKClassifier(**{**SMALL, "max_iter": 7}, learning_rate_init=1e-14, tol=1e-6,
                        n_iter_no_change=50, solver="adam", random_state=0).fit(X, y)
    lrs = clf.learning_rates_
    assert lrs[0] == 1e-14 and lrs[-1] < lrs[0]


@pytest.mark.parametrize("early_stopping", [False, True])
@pytest.mark.parametrize("losses,expected", [
    # a loss that keeps falling: the learning rate is never halved
    ([1.0 * 0.9**e for e in range(12)], [1.0] * 12),
    # a stalled loss: halved after 5 epochs without progress, then after 5 more
    ([1.0] * 12, [1.0] * 6 + [0.5] * 5 + [0.25]),
    # decreases within tol (relative, tol=1e-4) are no progress
    ([1.0 - 1e-6 * e for e in range(12)], [1.0] * 6 + [0.5] * 5 + [0.25]),
    # progress resets the count
    ([3.0, 3.0, 3.0, 3.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0],
     [1.0] * 10 + [0.5] * 2),
])
def test_adaptive_learning_rate_follows_the_monitored_loss(motif_data, monkeypatch, losses,
                                                           expected, early_stopping):
    """Halve when the monitored loss has not decreased by more than tol (relative) for 5 epochs.

    The monitored loss is scripted: the training loss passed to the epoch callback, or with
    ``early_stopping`` the validation loss (the task loss computed without grad), while the
    training loss then moves the other way (``2 - loss``) to show it is not the one monitored.
    """
    import skset.neural_network._otk as sotk

    real_loss = OTKClassifier._loss
    lr0 = 1e-3
    n_val = [0]

    def scripted_loss(out, target):
        if torch.is_grad_enabled():  # a training batch
            return real_loss(out, target)
        n_val[0] += 1  # one validation per epoch
        return torch.tensor(losses[n_val[0] - 1])

    class ScriptedPlateau(sotk.ReduceLROnPlateau):
        """The schedule of the estimator, shown a scripted training loss."""

        def on_epoch_end(self, state):
            real = state.epoch_loss
            state.epoch_loss = 2.0 - losses[state.epoch] if early_stopping else losses[state.epoch]
            try:
                super().on_epoch_end(state)
            finally:
                state.epoch_loss = real

    monkeypatch.setattr(sotk, "ReduceLROnPlateau", ScriptedPlateau)
    monkeypatch.setattr(OTKClassifier, "_loss", staticmethod(scripted_loss))
    X, y = motif_data
    clf = OTKClassifier(**{**SMALL, "max_iter": 12}, learning_rate_init=lr0, tol=1e-4,
                        n_iter_no_change=100, early_stopping=early_stopping, solver="adam",
                        random_state=0).fit(X, y)
    assert clf.n_iter_ == 12 and n_val[0] == (12 if early_stopping else 0)
    np.testing.assert_allclose(np.array(clf.learning_rates_) / lr0, expected)


def test_regressor_learns_and_has_closed_form_head():
    rng = np.random.default_rng(1)
    X = _sets(rng, 80, d=2, lo=5, hi=15)
    y = np.array([s[:, 0].mean() * 3.0 + 10.0 for s in X])
    for solver in ("alternating", "adam"):
        reg = OTKRegressor(n_components=12, n_supports=3, max_iter=3, solver=solver,
                           random_state=0, device="cpu").fit(X, y)
        pred = reg.predict(X)
        assert pred.shape == (80,)
        assert reg.score(X, y) > 0.7
    y2 = np.stack([y, -y], 1)
    reg = OTKRegressor(n_components=12, n_supports=3, max_iter=2, random_state=0,
                       device="cpu").fit(X, y2)
    assert reg.predict(X).shape == (80, 2)


# -- errors --
@pytest.mark.parametrize("param,value,match", [
    ("n_components", -1, "n_components"),
    ("n_components", 2.5, "n_components"),
    ("window", 0, "window"),
    ("n_supports", 0, "n_supports"),
    ("epsilon", 0.0, "epsilon"),
    ("bandwidth", -1.0, "bandwidth"),
    ("position_sigma", -0.1, "position_sigma"),
    ("solver", "sgd", "solver"),
    ("learning_rate", "invscaling", "learning_rate"),
    ("max_iter", 0, "max_iter"),
    ("learning_rate_init", 0.0, "learning_rate_init"),
    ("alpha", -1.0, "alpha"),
    ("fit_method", "em", "fit_method"),
    ("warm_start", "yes", "warm_start"),
    ("position_mode", "after", "position_mode"),
])
def test_bad_parameters(motif_data, param, value, match):
    X, y = motif_data
    with pytest.raises(ValueError, match=match):
        OTKClassifier(**{**SMALL, param: value}).fit(X, y)


def test_bad_inputs(motif_data):
    X, y = motif_data
    clf = OTKClassifier(**SMALL, random_state=0)
    with pytest.raises(NotFittedError):
        clf.predict(X)
    with pytest.raises(ValueError, match="at least 2 classes"):
        clf.fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="one target per set"):
        clf.fit(X, y[:-1])
    with pytest.raises(ValueError, match="set 1"):
        clf.fit([X[0], X[1][:2]] + X[2:], y)  # shorter than the k-mer window
    with pytest.raises(ValueError, match="NaN"):
        bad = [s.copy() for s in X]
        bad[3][0, 0] = np.nan
        clf.fit(bad, y)
    clf.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict([np.zeros((10, 5))])
    with pytest.raises(ValueError, match="numeric targets"):
        OTKRegressor(**SMALL).fit(X, np.array(["a"] * len(X)))


def test_convergence_warning_when_max_iter_reached(motif_data):
    X, y = motif_data
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        OTKClassifier(**{**SMALL, "max_iter": 1}, random_state=0).fit(X, y)
    assert any(issubclass(w.category, ConvergenceWarning) for w in rec)


# -- early stopping: the validation sets stay out of the unsupervised initialisation too --
def test_early_stopping_initialisation_sees_only_the_training_part(motif_data, monkeypatch):
    from sklearn.utils import check_random_state

    from skset.neural_network._training import split_validation

    X, y = motif_data
    seen = {}
    init = OTKClassifier._initial_module

    def spy(self, sets, n_outputs, rng, *weights):  # sample_weight, element masses
        seen["sets"] = list(sets)
        return init(self, sets, n_outputs, rng, *weights)

    monkeypatch.setattr(OTKClassifier, "_initial_module", spy)
    clf = OTKClassifier(**{**SMALL, "max_iter": 1}, early_stopping=True, validation_fraction=0.25,
                        random_state=0).fit(X, y)
    # the split fit() makes: its seed is the first draw of random_state, stratified on y
    seed = check_random_state(0).randint(2**31 - 1)
    tr, va = split_validation(len(X), 0.25, y=np.unique(y, return_inverse=True)[1],
                              stratify=True, seed=seed)
    assert len(seen["sets"]) == len(tr) and len(va) > 0
    for s, i in zip(seen["sets"], tr, strict=True):
        np.testing.assert_array_equal(s, np.asarray(X[i], dtype=s.dtype))
    # the anchors and references are the unsupervised fits on the training sets alone
    tr_sets = [X[i] for i in tr]
    nys = clone(clf.nystrom_)
    # as the model fits it: "auto" starts from the paper's map
    nys._fit_with_incumbent(tr_sets, np.unique(y, return_inverse=True)[1][tr], incumbent=PAPER_MAP)
    np.testing.assert_array_equal(nys.anchors_, clf.nystrom_.anchors_)
    emb = clone(clf.embedding_).fit(nys.transform(tr_sets))
    np.testing.assert_array_equal(emb.references_, clf.embedding_.references_)
    assert len(clf.embedding_.assignments_) == len(tr)


def test_element_map_starts_from_the_papers_map(motif_data):
    """The supervised models fit their NystromFeatures with the paper's map as the incumbent of
    the "auto" parameters (NystromFeatures._fit_with_incumbent), without changing the estimator:
    without usable labels the incumbent is taken as it is, and a later plain fit starts from
    the fixed default again."""
    X, _ = motif_data
    clf = OTKClassifier(**{**SMALL, "max_iter": 1}, random_state=0).fit(*motif_data)
    assert vars(clf.nystrom_).keys() == vars(clone(clf.nystrom_).fit(X)).keys()
    nys = clone(clf.nystrom_)._fit_with_incumbent(X, None, incumbent=PAPER_MAP)
    got = {"standardize": nys.standardize_, "normalize": nys.normalize_,
           "keep_norm": nys.keep_norm_, "bandwidth": nys.relative_bandwidth_}
    assert got == PAPER_MAP and nys.selection_scores_ is None
    nys.fit(X)
    assert (nys.normalize_, nys.keep_norm_) == (DEFAULT_CHOICE["normalize"],
                                                DEFAULT_CHOICE["keep_norm"]) != (True, True)
    assert nys.anchors_.shape == clf.nystrom_.anchors_.shape


# -- n_supports above the distinct elements: capped by the initial OTKEmbedding, layer follows --
@pytest.mark.parametrize("n_components", [None, 4])
def test_capped_n_supports_in_supervised_models(n_components):
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(6, 3))
    X = [pts[rng.integers(0, 6, size=5)] for _ in range(20)]  # 100 elements, 6 distinct
    y = np.tile([0, 1], 10)
    k = n_components or 3
    for est in (OTKClassifier(n_components=n_components, n_supports=10, max_iter=2,
                              random_state=0, device="cpu"),
                OTKRegressor(n_components=n_components, n_supports=10, max_iter=2,
                             random_state=0, device="cpu")):
        with pytest.warns(UserWarning, match="n_supports=10"):
            est.fit(X, y)
        assert est.embedding_.n_supports_ == 6 and est.module_.otk.n_supports == 6
        assert est.module_.otk.references.shape == (1, 6, k)
        assert est.transform(X).shape == (20, 6 * k)
        assert len(est.get_feature_names_out()) == 6 * k
        assert est.predict(X).shape == (20,)


@pytest.mark.parametrize("mode", ["kernel", "similarity"])
def test_position_mode_reaches_embedding_and_layer(motif_data, mode):
    X, y = motif_data
    clf = OTKClassifier(**{**SMALL, "max_iter": 1}, position_mode=mode, random_state=0).fit(X, y)
    assert clf.embedding_.position_mode == mode and clf.module_.otk.position_mode == mode
    # the supervised setting: 10 fixed Sinkhorn iterations, no tolerance, in both
    assert clf.embedding_.sinkhorn_tol is None and clf.module_.otk.sinkhorn_tol is None
    assert clf.module_.otk.sinkhorn_iter == 10
    # at initialisation the network's embedding is the unsupervised one
    clf0 = OTKClassifier(**{**SMALL, "max_iter": 1}, position_mode=mode,
                         learning_rate_init=1e-12, random_state=0).fit(X, y)
    feats = clf0.embedding_.transform(clf0.nystrom_.transform(X))
    np.testing.assert_allclose(clf0.transform(X), feats, rtol=1e-4, atol=1e-4)


def test_dilation_without_the_element_map_is_refused():
    # without the element map the k-mers are contiguous: a dilation was silently ignored
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(6, 10)), 2)) for _ in range(20)]
    with pytest.raises(ValueError, match=r"dilation=2 needs the element map"):
        OTKClassifier(n_components=None, window=3, dilation=2, max_iter=1).fit(X, np.arange(20) % 2)


@pytest.mark.parametrize("cls", [OTKClassifier, OTKRegressor])
def test_features_far_from_zero_are_read_in_float32(cls):
    # features near 1e8 with a spread of 1: the float32 network read them rounded to steps of 8
    # (a classifier at chance); their training mean is subtracted in float64 first
    rng = np.random.default_rng(0)
    y = np.arange(40) % 2
    X = [rng.normal(loc=y[i], size=(int(rng.integers(2, 6)), 2)) for i in range(40)]
    far = [x + np.array([1e8, 0.0]) for x in X]  # one feature far, one not
    kw = dict(n_components=4, n_supports=3, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        near, moved = cls(**kw).fit(X, y), cls(**kw).fit(far, y)
        assert near.input_offset_ is None
        assert moved.input_offset_[1] == 0.0 and abs(moved.input_offset_[0] - 1e8) < 1.0
        out = "predict_proba" if cls is OTKClassifier else "predict"
        np.testing.assert_allclose(getattr(moved, out)(far), getattr(near, out)(X), atol=1e-3)
        assert cls(dtype="float64", **kw).fit(far, y).input_offset_ is None


def test_offset_and_window_read_the_sets_and_elements_that_count():
    """Elements of mass 0 and sets of weight 0 take no part in the network's offset (an element
    of mass 0 at 1e9 in every set took the offset away: training accuracy 0.63 against 1.0), and
    a training set shorter than the k-mer window is refused only when it counts."""
    rng = np.random.default_rng(0)
    y = np.arange(40) % 2
    X = [rng.normal(loc=y[i], size=(6, 2)) + np.array([1e5, 0.0]) for i in range(40)]
    kw = dict(n_components=4, window=1, n_supports=3, position_sigma=None, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = OTKClassifier(**kw).fit(X, y)
        heavy = OTKClassifier(**kw).fit([np.vstack([x, [[1e9, 1e9]]]) for x in X], y,
                                        element_weight=[np.r_[np.ones(6), 0.0]] * 40)
        np.testing.assert_array_equal(heavy.input_offset_, ref.input_offset_)
        assert heavy.score([np.vstack([x, [[0.0, 0.0]]]) for x in X], y,
                           element_weight=[np.r_[np.ones(6), 0.0]] * 40) == ref.score(X, y)
        short = OTKClassifier(**{**kw, "window": 3}).fit(
            X + [X[0][:2]], np.r_[y, 0], sample_weight=np.r_[np.ones(40), 0.0])
        assert short.window_ == 3
    with pytest.raises(ValueError, match="set 40 has 2 elements, fewer than the k-mer window"):
        OTKClassifier(**{**kw, "window": 3}).fit(X + [X[0][:2]], np.r_[y, 0])


@pytest.mark.parametrize("cls", [OTKClassifier, OTKRegressor])
def test_network_without_a_map_reads_features_far_from_zero_as_its_embedding(cls):
    # 100 spreads from zero, without the element map: the network's own offset is not taken
    # (OFFSET_RATIO), its embedding_'s is, and the network's OTK layer must read the sets as
    # embedding_ does. It read them unshifted: transform 0.76 away from the same sets at 0 and
    # regression predictions 0.09 away; now 0.05 and 0.005 in float32 as in float64 (the
    # 10-iteration plans are not quite shift-invariant)
    rng = np.random.default_rng(0)
    y = np.arange(40) % 2
    X = [rng.normal(loc=y[i], size=(int(rng.integers(2, 6)), 2)) for i in range(40)]
    far = [x + np.array([100.0, 0.0]) for x in X]
    kw = dict(n_components=None, n_supports=3, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        near, moved = cls(**kw).fit(X, y), cls(**kw).fit(far, y)
    assert moved.input_offset_ is None and moved.embedding_.input_offset_ is not None
    assert np.abs(moved.transform(far) - near.transform(X)).max() < 0.1
    out = "predict_proba" if cls is OTKClassifier else "predict"
    # (float32 rounding, which three epochs of training carry: 0.0102 at the classifier's C=1)
    assert np.abs(getattr(moved, out)(far) - getattr(near, out)(X)).max() < 0.02


def _classifier_on_far_features(offset, n_components):
    """30 sets of 2 features, the first near ``offset``; an OTKClassifier of 3 epochs on them."""
    rng = np.random.default_rng(0)
    y = np.arange(30) % 2
    X = [rng.normal(loc=y[i], size=(int(rng.integers(2, 6)), 2)) + np.array([offset, 0.0])
         for i in range(30)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return X, OTKClassifier(n_components=n_components, n_supports=3, max_iter=3,
                                random_state=0).fit(X, y)


@pytest.mark.parametrize("n_components", [None, 8])
def test_exported_network_reads_its_sets_less_the_offset(n_components):
    # the serving module of a supervised OTK model left out its input_offset_: at features of
    # 1e4 its probabilities were 1.0 away from predict_proba's
    from skset._sets import pack
    from skset.export import serving_module

    X, clf = _classifier_on_far_features(1e4, n_components)
    assert clf.input_offset_ is not None
    Xp, M = pack(X, dtype=torch.float32)
    with torch.no_grad():
        served = serving_module(clf)(Xp, M)
    proba = served[clf._serving_outputs.index("predict_proba")]
    # (the graph reads float32 features of 1e4: their rounding moves it by about 1e-3)
    np.testing.assert_allclose(proba.numpy(), clf.predict_proba(X), atol=5e-3)


def test_files_without_the_layers_offset_load_as_they_computed(tmp_path):
    # files written before OTKLayer had input_offset hold no such buffer: the rebuilt layer
    # reads its sets as those models did (load refused them: "Missing key otk.input_offset")
    import skset

    X, clf = _classifier_on_far_features(100.0, None)
    layer = clf.module_.otk
    with torch.no_grad():  # as before: input-space references, the sets read as they are
        layer.references.add_(layer.input_offset)
    layer.input_offset = None
    proba = clf.predict_proba(X)
    skset.save(clf, tmp_path / "old.skset")
    loaded = skset.load(tmp_path / "old.skset")
    assert loaded.module_.otk.input_offset is None
    np.testing.assert_array_equal(loaded.predict_proba(X), proba)


def test_a_set_shorter_than_the_window_is_named_as_such():
    # OTKClassifier said "set 1 has 3 element(s); at least 5 are needed", where the other
    # estimators with k-mers name the window
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 2)) for n in (8, 3, 9, 7)]
    with pytest.raises(ValueError, match=r"set 1 has 3 elements, fewer than the k-mer window \(5\)"):
        OTKClassifier(n_components=4, n_supports=2, window=5, max_iter=1).fit(X, [0, 1, 0, 1])


def test_make_motif_order_refuses_more_motifs_than_words():
    """Three distinct motifs of one letter from an alphabet of two cannot be drawn: a
    ``ValueError`` naming them (the draw looped for ever)."""
    with pytest.raises(ValueError, match="n_motifs=3 distinct motifs .* alphabet of 2 letters has 2"):
        make_motif_order(3, min_length=10, max_length=10, alphabet_size=2, motif_length=1, n_motifs=3)
    X, y = make_motif_order(3, min_length=10, max_length=10, alphabet_size=2, motif_length=1,
                            n_motifs=2, random_state=0)
    assert len(X) == 3 and set(y.tolist()) <= {0, 1}
