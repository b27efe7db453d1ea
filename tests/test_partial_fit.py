"""partial_fit of the neural set estimators (scikit-learn's conventions): classes on the first
call, one epoch per call with the optimizer's state kept, n_iter_ counting calls, a call after
fit continuing the model, and a single call equal to fit(max_iter=1)."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone, is_regressor
from sklearn.exceptions import ConvergenceWarning

from skset.neural_network import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    OTKClassifier,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

SMALL = {
    SetTransformerClassifier: dict(hidden_size=8, n_heads=2, n_layers=1, batch_size=8),
    SetTransformerRegressor: dict(hidden_size=8, n_heads=2, n_layers=1, batch_size=8),
    DeepSetsClassifier: dict(hidden_size=8, batch_size=8),
    DeepSetsRegressor: dict(hidden_size=8, batch_size=8),
    OTKClassifier: dict(n_components=8, n_supports=3, batch_size=8),
    OTKRegressor: dict(n_components=8, n_supports=3, batch_size=8),
}


def _data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=0.7 * (i % 3), size=(int(rng.integers(3, 8)), 2)) for i in range(n)]
    return X, np.arange(n) % 3


def _make(cls, **kw):
    return cls(**SMALL[cls], random_state=0, device="cpu", **kw)


def _y(cls, y):
    return y if "Classifier" in cls.__name__ else y.astype(float) + 0.5


@pytest.mark.parametrize("cls", list(SMALL), ids=lambda c: c.__name__)
def test_one_call_equals_fit_for_one_epoch(cls):
    X, y = _data()
    y = _y(cls, y)
    kw = {"classes": [0, 1, 2]} if "Classifier" in cls.__name__ else {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # partial_fit never warns
        inc = _make(cls).partial_fit(X, y, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # partial_fit holds out nothing: neither does the reference (regressors: "auto" would)
        es = {} if "Classifier" in cls.__name__ else {"early_stopping": False}
        ref = _make(cls, max_iter=1, **es).fit(X, y)
    out = "predict_proba" if "Classifier" in cls.__name__ else "predict"
    np.testing.assert_array_equal(getattr(inc, out)(X), getattr(ref, out)(X))
    assert inc.n_iter_ == 1 and inc.loss_curve_ == ref.loss_curve_


@pytest.mark.parametrize("cls", [SetTransformerClassifier, OTKRegressor],
                         ids=lambda c: c.__name__)
def test_calls_accumulate_epochs_and_optimizer_state(cls):
    X, y = _data(60)
    y = _y(cls, y)
    est = _make(cls)
    chunks = [slice(0, 30), slice(30, 60)]
    for _ in range(3):
        for c in chunks:
            kw = {"classes": [0, 1, 2]} if "Classifier" in cls.__name__ else {}
            est.partial_fit(X[c], y[c], **kw)
    assert est.n_iter_ == 6 and len(est.loss_curve_) == 6
    steps = max(int(v["step"]) for v in est._optimizer_state["state"].values())
    assert steps == 6 * 4  # 30 sets in batches of 8: 4 steps a call, Adam's count carried over
    assert est.loss_curve_[-1] < est.loss_curve_[1]  # the same chunk, calls 2 and 6


def test_classes_rules():
    X, y = _data()
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        _make(DeepSetsClassifier).partial_fit(X, y)
    with pytest.raises(ValueError, match="not in classes"):
        _make(DeepSetsClassifier).partial_fit(X, y, classes=[0, 1])
    # a chunk may miss classes: classes_ come from classes=
    est = _make(DeepSetsClassifier).partial_fit(X[:10], np.where(y[:10] == 2, 0, y[:10]),
                                                classes=[0, 1, 2])
    np.testing.assert_array_equal(est.classes_, [0, 1, 2])
    assert est.predict_proba(X).shape == (len(X), 3)
    est.partial_fit(X, y)  # later calls need no classes
    est.partial_fit(X, y, classes=[2, 0, 1])  # and may repeat them
    with pytest.raises(ValueError, match="not seen in the first fit"):
        est.partial_fit(X[:3], np.array([0, 1, 7]))
    # other classes later are refused at once, as in scikit-learn (they were ignored)
    for cls in (OTKClassifier, SetTransformerClassifier, DeepSetsClassifier):
        first = _make(cls).partial_fit(X, y, classes=[0, 1, 2])
        with pytest.raises(ValueError, match=r"classes=\[0, 1, 2, 7\] is not the fitted"):
            first.partial_fit(X, y, classes=[0, 1, 2, 7])


def test_partial_fit_after_fit_continues_and_clone_starts_afresh():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = _make(DeepSetsClassifier, max_iter=2).fit(X, y)
    weights = {k: v.clone() for k, v in est.module_.state_dict().items()}
    est.partial_fit(X, y)
    assert est.n_iter_ == 3 and len(est.loss_curve_) == 3
    assert any(not np.allclose(v.numpy(), est.module_.state_dict()[k].numpy())
               for k, v in weights.items())
    fresh = clone(est)
    assert not hasattr(fresh, "module_")
    with pytest.raises(ValueError, match="features"):
        est.partial_fit([x[:, :1] for x in X], y)


def test_partial_fit_ignores_early_stopping():
    X, y = _data()
    est = _make(OTKClassifier, early_stopping=True).partial_fit(X, y, classes=[0, 1, 2])
    assert est.validation_scores_ == [] and est.n_iter_ == 1


# -- issue 34: a refused call changes nothing --------------------------------------------------------
def _state(est):
    """Every fitted attribute of ``est`` (and its network's parameters), copied."""
    import copy

    import torch

    out = {}
    for k, v in vars(est).items():
        if k.endswith("_") and not k.startswith("__"):
            if isinstance(v, torch.nn.Module):
                out[k] = {n: t.detach().clone() for n, t in v.state_dict().items()}
            else:
                out[k] = copy.deepcopy(v)
    return out


def _assert_same(a, b):
    import torch

    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], dict) and all(isinstance(t, torch.Tensor) for t in a[k].values()):
            for n in a[k]:
                torch.testing.assert_close(a[k][n], b[k][n], rtol=0, atol=0)
        elif isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k])
        elif " at 0x" not in str(a[k]):  # (not an object compared by identity)
            assert str(a[k]) == str(b[k]), k


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("cls", list(SMALL) + ["OTKEmbedding", "NystromFeatures"],
                         ids=lambda c: c if isinstance(c, str) else c.__name__)
def test_d10_partial_fit_after_set_params_dtype_refuses_and_changes_nothing(cls):
    """D10: after set_params(dtype="float64") on a float32 model, partial_fit refuses up front
    with a ValueError naming dtype, and the model is unchanged (was a torch RuntimeError with
    dtype_ switched and OTKEmbedding's references_ already moved)."""
    from skset import NystromFeatures, OTKEmbedding

    X, y = _data()
    if cls == "OTKEmbedding":
        est, y = OTKEmbedding(n_supports=3, random_state=0, device="cpu").fit(X), None
    elif cls == "NystromFeatures":
        est, y = NystromFeatures(n_components=8, random_state=0, device="cpu").fit(X), None
    else:
        est = _make(cls, max_iter=1)
        y = _y(cls, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(X, y)
    before = _state(est)
    est.set_params(dtype="float64")
    with pytest.raises(ValueError, match=r"dtype='float64' differs from the dtype the model was "
                                         r"fitted in \('float32'\)"):
        est.partial_fit(X, y) if y is not None else est.partial_fit(X)
    _assert_same(before, _state(est))
    est.set_params(dtype="float32")  # back: it continues
    est.partial_fit(X, y) if y is not None else est.partial_fit(X)


# a parameter of what the network is, changed after the fit (set_params)
_NETWORK_PARAM = {SetTransformerClassifier: ("n_heads", 1), SetTransformerRegressor: ("n_layers", 2),
                  DeepSetsClassifier: ("pooling", "sum"), DeepSetsRegressor: ("hidden_size", 4),
                  OTKClassifier: ("epsilon", 0.1), OTKRegressor: ("n_supports", 2)}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("cls", list(SMALL), ids=lambda c: c.__name__)
def test_network_params_changed_after_fit_are_refused_by_what_keeps_the_network(cls):
    """A warm start, partial_fit and skset.save keep the fitted network: after set_params of a
    parameter that built it (its architecture, its preprocessing) each refuses with a ValueError
    naming it, the model unchanged (a warm start kept the old network silently, and skset.load
    then refused the file it had saved); parameters of how it trains may change."""
    import io

    import skset

    X, y = _data()
    y = _y(cls, y)
    est = _make(cls, max_iter=1).fit(X, y)
    before = _state(est)
    name, value = _NETWORK_PARAM[cls]
    fitted = est.get_params()[name]
    est.set_params(**{name: value})
    for call in (lambda: est.partial_fit(X, y), lambda: est.set_params(warm_start=True).fit(X, y),
                 lambda: skset.save(est, io.BytesIO())):
        with pytest.raises(ValueError, match=rf"{name}={value!r} \(fitted with {fitted!r}\)"):
            call()
    _assert_same(before, _state(est))
    est.set_params(**{name: fitted}, learning_rate_init=1e-4, max_iter=2, batch_size=4)
    est.fit(X, y)  # a warm start that changes only how it trains
    buf = io.BytesIO()
    skset.save(est, buf)
    buf.seek(0)
    method = "predict" if is_regressor(est) else "predict_proba"
    np.testing.assert_allclose(getattr(skset.load(buf), method)(X[:5]),
                               getattr(est, method)(X[:5]), rtol=1e-6, atol=1e-7)
    est.set_params(warm_start=False, **{name: value}).fit(X, y)  # a new network: any value


def test_d10_nystrom_partial_fit_after_set_params_window_names_it():
    """D10: NystromFeatures after set_params(window=2): a ValueError naming window (was numpy's
    broadcast error), the model unchanged."""
    from skset import NystromFeatures

    X, _ = _data()
    est = NystromFeatures(n_components=8, random_state=0, device="cpu").fit(X)
    before = _state(est)
    est.set_params(window=2)
    with pytest.raises(ValueError, match=r"window=2, kmer_coding='level_shape' give k-mers of 6 "
                                         r"values, but the fitted anchors have 2 \(fitted with "
                                         r"window=1\)"):
        est.partial_fit(X)
    _assert_same(before, _state(est))


@pytest.mark.parametrize("bad", ["short", "nan", "unknown-class", "mixed-types"])
def test_d11_utils_partial_fit_refused_by_the_last_step_changes_no_step(bad):
    """D11: skset.utils.partial_fit(pipeline, X, y) with a y the final step refuses (wrong
    length, NaN, a class outside classes, str mixed with int) leaves every step as it was (was:
    the earlier steps updated with the chunk)."""
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skset import NystromFeatures, OTKEmbedding
    from skset.utils import partial_fit

    X, y = _data()
    pipe = make_pipeline(NystromFeatures(n_components=8, random_state=0, device="cpu"),
                         OTKEmbedding(n_supports=3, random_state=0, device="cpu"),
                         StandardScaler(), SGDClassifier(loss="log_loss", random_state=0))
    partial_fit(pipe, X, y, classes=[0, 1, 2])
    before = [_state(step) for _, step in pipe.steps]
    yb = {"short": y[:-1], "nan": np.where(np.arange(len(y)) == 3, np.nan, y),
          "unknown-class": np.where(np.arange(len(y)) == 3, 7, y),
          "mixed-types": np.array(["a"] + list(y[1:]), dtype=object)}[bad]
    match = {"short": "y has 47 entries but X holds 48 sets", "nan": "y contains NaN",
             "unknown-class": r"y holds classes \[7\] not in classes=", "mixed-types":
             "y mixes label types"}[bad]
    with pytest.raises((ValueError, TypeError), match=match):
        partial_fit(pipe, X, yb, classes=[0, 1, 2])
    for (_, step), state in zip(pipe.steps, before):
        _assert_same(state, _state(step))


def test_d11_a_later_refusal_restores_the_earlier_steps():
    """D11: when the final step refuses the chunk for a reason not checked up front (here its
    sample_weight), the earlier steps are put back as they were."""
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline

    from skset import NystromFeatures, OTKEmbedding
    from skset.utils import partial_fit

    X, y = _data()
    pipe = make_pipeline(NystromFeatures(n_components=8, random_state=0, device="cpu"),
                         OTKEmbedding(n_supports=3, random_state=0, device="cpu"),
                         SGDClassifier(loss="log_loss", random_state=0))
    partial_fit(pipe, X, y, classes=[0, 1, 2])
    before = [_state(step) for _, step in pipe.steps[:-1]]
    w = np.ones(len(X))
    w[2] = np.inf  # the skset steps take it (relative weights); SGDClassifier refuses it
    with pytest.raises(ValueError):
        partial_fit(pipe, X, y, sample_weight=w)
    for (_, step), state in zip(pipe.steps[:-1], before):
        _assert_same(state, _state(step))


def test_d11_utils_partial_fit_takes_sample_weight():
    """skset.utils.partial_fit passes sample_weight to every step: weight 0 leaves a set out
    exactly (the same model as without those sets); a step without it is named."""
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline

    from skset import NystromFeatures, OTKEmbedding
    from skset.utils import partial_fit

    X, y = _data()
    w = (np.arange(len(X)) % 4 != 0).astype(float)
    kept = [x for x, wi in zip(X, w) if wi > 0]

    def pipe():
        return make_pipeline(NystromFeatures(n_components=8, random_state=0, device="cpu",
                                             dtype="float64"),
                             OTKEmbedding(n_supports=3, random_state=0, device="cpu",
                                          dtype="float64"))

    a = partial_fit(pipe(), X, sample_weight=w)
    b = partial_fit(pipe(), kept)
    np.testing.assert_allclose(a[0].anchors_, b[0].anchors_, atol=1e-10)
    np.testing.assert_allclose(a.transform(X), b.transform(X), atol=1e-8)

    class NoWeights(SGDClassifier):
        def partial_fit(self, X, y, classes=None):
            return super().partial_fit(X, y, classes=classes)

    with pytest.raises(TypeError, match=r"step 'noweights' \(NoWeights\): its partial_fit "
                                        "takes no sample_weight"):
        partial_fit(make_pipeline(pipe()[0], pipe()[1], NoWeights()), X, y, classes=[0, 1, 2],
                    sample_weight=w)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_warm_start_applies_changed_training_params_and_refuses_class_weight():
    """A warm start continues the optimizer's state with the learning rate and alpha set since
    (the saved state brought the old ones back); OTKRegressor's explicit alpha reaches its head;
    class_weight (class_weight_ is computed by the first fit) is refused by name."""
    X, y = _data()
    est = _make(DeepSetsClassifier, max_iter=2).fit(X, y)
    est.set_params(warm_start=True, learning_rate_init=1e-5, alpha=0.5).fit(X, y)
    assert est.learning_rates_[-1] == 1e-5
    assert est._optimizer_state["param_groups"][0]["weight_decay"] == 0.5
    with pytest.raises(ValueError, match=r"class_weight='balanced' \(fitted with None\)"):
        est.set_params(class_weight="balanced").fit(X, y)
    reg = _make(OTKRegressor, max_iter=1, alpha=1e-3).fit(X, y.astype(float))
    reg.set_params(warm_start=True, alpha=100.0).fit(X, y.astype(float))
    assert reg.alpha_ == 100.0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_otk_first_chunk_missing_a_class_leaves_it_learnable():
    """A first partial_fit chunk without a class (classes= names it): its head row starts level
    with the others (its bias ran off to about -7 and later calls never predicted it)."""
    X, y = _data()
    y = (y > 0).astype(int)
    first = np.flatnonzero(y == 0)[:12]
    est = _make(OTKClassifier).partial_fit([X[i] for i in first], y[first], classes=[0, 1])
    bias = est.module_.head.bias.detach().numpy()
    assert bias[1] == bias[0] and not est.module_.head.weight.detach()[1].any()
    for _ in range(5):
        est.partial_fit(X, y)
    assert set(est.predict(X)) == {0, 1}


def test_ridge_head_from_summed_chunks_is_the_whole_ridge():
    """The regressor's stream head: the sums of the ridge's normal equations over chunks solve to
    the ridge of all the rows (weights, several outputs, rows far from zero)."""
    import torch

    from skset.neural_network._heads import (
        add_ridge_stats,
        fit_ridge_head,
        fit_ridge_head_stats,
        ridge_stats,
    )

    g = torch.Generator().manual_seed(0)
    Z = torch.randn(60, 7, generator=g, dtype=torch.float64) + 1e3
    Y = torch.randn(60, 2, generator=g, dtype=torch.float64)
    w = torch.rand(60, generator=g, dtype=torch.float64) + 0.5
    for alpha in (1e-3, 1.0, float("inf")):
        whole, parts = torch.nn.Linear(7, 2).double(), torch.nn.Linear(7, 2).double()
        fit_ridge_head(whole, Z, Y, alpha, w)
        stats = None
        for idx in (slice(0, 11), slice(11, 40), slice(40, 60)):
            shift = None if stats is None else stats["shift"]
            stats = add_ridge_stats(stats, ridge_stats(Z[idx], Y[idx], w[idx], shift))
        fit_ridge_head_stats(parts, stats, alpha)
        torch.testing.assert_close(parts.weight, whole.weight, rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(parts.bias, whole.bias, rtol=1e-9, atol=1e-9)


def test_otk_regressor_stream_keeps_its_fit():
    """OTKRegressor's partial_fit keeps the head in closed form over every chunk seen: a stream
    stays near its first chunk's fit (Adam's steps on the head, about the learning rate each
    against weights of a few thousandths, took the held-out R^2 from 0.88 to -7 in one call),
    continues after a save and a load, and a partial_fit after fit keeps the fit's quality."""
    import io

    import skset

    def draw(n, seed):
        rng = np.random.default_rng(seed)
        X = [rng.normal(size=(int(rng.integers(4, 10)), 2)) for _ in range(n)]
        return X, np.array([s[:, 0].mean() for s in X])

    X, y = draw(90, 0)
    Xt, yt = draw(200, 1)
    est = OTKRegressor(random_state=0, device="cpu")
    scores = []
    for lo in range(0, 90, 30):
        est.partial_fit(X[lo:lo + 30], y[lo:lo + 30])
        scores.append(est.score(Xt, yt))
    assert min(scores) > 0.8 and scores[-1] >= scores[0] - 0.02, scores
    assert float(est.head_stats_["total"]) == 90
    buf = io.BytesIO()
    skset.save(est, buf)
    loaded = skset.load(io.BytesIO(buf.getvalue()))
    est.partial_fit(X[:30], y[:30]), loaded.partial_fit(X[:30], y[:30])
    np.testing.assert_array_equal(est.predict(Xt), loaded.predict(Xt))
    fitted = OTKRegressor(random_state=0, device="cpu", max_iter=5).fit(X, y)
    assert not hasattr(fitted, "head_stats_")
    before = fitted.score(Xt, yt)
    fitted.partial_fit(X[:30], y[:30])
    assert fitted.score(Xt, yt) > before - 0.05, (before, fitted.score(Xt, yt))


def test_otk_regressor_stream_weighs_chunks_by_their_weights():
    """A stream's chunks count by their ``sample_weight`` in the head's sums: a chunk of 20 sets
    of weight 3 adds 60, one of weights 3, ..., 3, 6 adds 63, an unweighted one 20 (each chunk's
    weights were scaled to their largest, and equal weights read as none: 20, 20 and 10.5); the
    same weights times any factor on every chunk fit the same stream."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 2)) for _ in range(40)]
    y = np.array([x[:, 0].mean() for x in X])

    def stream(w1, w2):
        est = OTKRegressor(n_components=6, n_supports=3, max_iter=2, random_state=0, device="cpu")
        est.partial_fit(X[:20], y[:20], sample_weight=w1)
        return est.partial_fit(X[20:], y[20:], sample_weight=w2)

    for w2, total in ((None, 40.0), (np.full(20, 3.0), 80.0), (np.r_[np.full(19, 3.0), 6.0], 83.0),
                      (3.0, 80.0)):
        assert float(stream(None, w2).head_stats_["total"]) == pytest.approx(total)
    w1, w2 = rng.uniform(0.5, 2, 20), rng.uniform(0.5, 2, 20)
    a, b = stream(w1, w2), stream(7 * w1, 7 * w2)
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-5, atol=1e-7)
