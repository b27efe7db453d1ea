"""The Set Transformer's dropout (``dropout``): on the feed-forward output of every attention block
and of the pooling's rFF, in training only, its masks seeded from ``random_state``."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone

import skset
from skset import SetTransformerClassifier, SetTransformerRegressor
from skset.nn import MAB, PMA, SetTransformer

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SMALL = dict(hidden_size=8, n_heads=2, n_layers=1, max_iter=4, random_state=0, device="cpu")


def _sets(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=i % 2, size=(int(rng.integers(3, 9)), 2)) for i in range(n)]
    return X, np.arange(n) % 2


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 6, 4, generator=g)
    mask = torch.arange(6) < torch.tensor([[6], [4], [2]])
    return x, mask


@pytest.mark.parametrize("n_inducing", [None, 3])
@pytest.mark.parametrize("residual", ["original", "clean"])
def test_module_drops_in_training_only_and_predicts_as_without_it(n_inducing, residual):
    x, mask = _batch()
    torch.manual_seed(0)
    net = SetTransformer(4, 8, 2, n_layers=2, n_heads=2, n_inducing=n_inducing,
                         residual=residual, norm="set" if residual == "clean" else "layer",
                         dropout=0.5)
    torch.manual_seed(0)
    plain = SetTransformer(4, 8, 2, n_layers=2, n_heads=2, n_inducing=n_inducing,
                           residual=residual, norm="set" if residual == "clean" else "layer")
    rates = {type(m).__name__: m.dropout for m in net.modules() if isinstance(m, (MAB, PMA))}
    assert rates == {"MAB": 0.5, "PMA": 0.5}
    net.train()
    assert not torch.equal(net(x, mask), net(x, mask))  # new masks at each call
    net.eval()
    plain.eval()
    torch.testing.assert_close(net(x, mask), plain(x, mask), rtol=0, atol=0)
    # set_dropout(0.0): training is deterministic again, and the same function as without it
    net.set_dropout(0.0).train()
    plain.train()
    torch.testing.assert_close(net(x, mask), plain(x, mask), rtol=0, atol=0)


def test_dropout_is_inverted_dropout_on_the_feed_forward_output():
    # the original block without norms: h + relu(drop(W h)), h = x + attention; each entry of
    # W h is zeroed with probability p, or kept and scaled by 1 / (1 - p)
    torch.manual_seed(0)
    mab = MAB(8, 2, norm=None, dropout=0.25).train()
    x = torch.randn(4, 50, 8)
    with torch.no_grad():
        out = mab(x, x)
        h = x + mab.attn(x, x, x, None, None, padding_finite=True)
        wh = mab.ff(h)
    positive = wh > 0  # where relu lets the feed-forward through
    dropped = positive & (out == h)
    kept = positive & ~dropped
    torch.testing.assert_close(out[kept], (h + wh / 0.75)[kept])
    torch.testing.assert_close(out[~positive], h[~positive])
    share = dropped.sum().item() / positive.sum().item()
    assert abs(share - 0.25) < 0.05, share


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, True, "0.1"])
def test_bad_rates_raise_naming_the_parameter(bad):
    with pytest.raises(ValueError, match="dropout"):
        SetTransformer(4, 8, 2, n_heads=2, dropout=bad)
    with pytest.raises(ValueError, match="dropout"):
        SetTransformerClassifier(dropout=bad, **SMALL).fit(*_sets())


def test_zero_is_the_network_without_dropout_bit_for_bit():
    X, y = _sets()
    a = SetTransformerClassifier(**SMALL).fit(X, y)
    b = SetTransformerClassifier(dropout=0.0, **SMALL).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.loss_curve_ == b.loss_curve_


@pytest.mark.parametrize("cls", [SetTransformerClassifier, SetTransformerRegressor])
def test_fit_repeats_with_random_state_and_leaves_the_global_generator(cls):
    X, y = _sets()
    y = y if cls is SetTransformerClassifier else y.astype(float)
    out = cls.predict_proba if cls is SetTransformerClassifier else cls.predict
    torch.manual_seed(1)
    state = torch.random.get_rng_state()
    first = cls(dropout=0.3, **SMALL).fit(X, y)
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.manual_seed(2)  # another global state: the same fit
    again = cls(dropout=0.3, **SMALL).fit(X, y)
    np.testing.assert_array_equal(out(first, X), out(again, X))
    assert first.loss_curve_ == again.loss_curve_
    plain = cls(**SMALL).fit(X, y)
    assert first.loss_curve_ != plain.loss_curve_  # the rate is used in training
    np.testing.assert_array_equal(out(first, X), out(first, X))  # predictions never drop



def test_a_cpu_fit_on_a_machine_with_gpus_leaves_their_generators(monkeypatch):
    """``torch.manual_seed`` reseeds every CUDA device's generator as well as the CPU's: the
    network's initialisation and the dropout masks seed only the generators they fork (a CPU fit:
    the CPU's). Recorded with two CUDA devices mocked: nothing reseeds a device, and the fit is
    the fit made without the mock."""
    X, y = _sets(20)
    kw = {**SMALL, "max_iter": 2}
    plain = SetTransformerClassifier(dropout=0.2, **kw).fit(X, y)
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch, "manual_seed", lambda seed: calls.append("manual_seed"))
    monkeypatch.setattr(torch.cuda, "manual_seed", lambda seed: calls.append("cuda"))
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: calls.append("cuda all"))
    mocked = SetTransformerClassifier(dropout=0.2, **kw).fit(X, y)
    assert calls == []
    np.testing.assert_array_equal(mocked.predict_proba(X), plain.predict_proba(X))
    assert mocked.loss_curve_ == plain.loss_curve_


def test_a_warm_start_may_change_the_rate_and_the_module_follows():
    X, y = _sets()
    est = SetTransformerClassifier(dropout=0.2, **SMALL).fit(X, y)
    assert {m.dropout for m in est.module_.modules() if isinstance(m, (MAB, PMA))} == {0.2}
    est.set_params(dropout=0.0, warm_start=True).fit(X, y)  # not refused: a training parameter
    assert {m.dropout for m in est.module_.modules() if isinstance(m, (MAB, PMA))} == {0.0}


def test_clone_pickle_save_and_models_saved_before_the_option(tmp_path):
    X, y = _sets()
    est = SetTransformerClassifier(dropout=0.1, **SMALL)
    assert clone(est).get_params()["dropout"] == 0.1
    est.fit(X, y)
    expected = est.predict_proba(X)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).predict_proba(X), expected)
    skset.save(est, tmp_path / "st.skset")
    np.testing.assert_array_equal(skset.load(tmp_path / "st.skset").predict_proba(X), expected)
    # a model pickled before the option: no parameter, blocks without the attribute
    state = dict(est.__getstate__())
    state.pop("dropout")
    for m in est.module_.modules():
        if isinstance(m, (MAB, PMA)):
            del m.dropout  # back to the class attribute, 0.0
    state["module_"] = est.module_
    legacy = SetTransformerClassifier.__new__(SetTransformerClassifier)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        legacy.__setstate__(state)
    assert legacy.dropout == 0.0
    np.testing.assert_array_equal(legacy.predict_proba(X), expected)
