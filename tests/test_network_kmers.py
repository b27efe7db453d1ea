"""The Set Transformer and Deep Sets read k-mers (``window``, ``dilation``): with
``window="auto"`` chosen from the labels by NystromFeatures' rule where order matters, single
elements on unordered bags, explicit values kept (the default: single elements); the exported
module reads the same k-mers."""

import numpy as np
import pytest
import torch
from test_window_auto import _bag_task as _bags  # bags of i.i.d. elements: order carries nothing
from test_window_auto import _order_task as _ramps  # rising / falling ramps: order is the class

from skset import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    NystromFeatures,
    SetTransformerClassifier,
    SetTransformerRegressor,
)
from skset._sets import kmer_level_shape
from skset.neural_network._network_kmers import choose_kmers, read_kmers

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
SMALL = dict(hidden_size=16, n_layers=1, max_iter=15, random_state=0, device="cpu")


@pytest.mark.parametrize("cls", [SetTransformerClassifier, DeepSetsClassifier])
def test_order_takes_kmers_and_bags_keep_elements(cls):
    X, y = _ramps()
    Xt, yt = _ramps(seed=1)
    assert (cls().window, cls(**SMALL).fit(X, y).window_) == (1, 1)  # the default
    est = cls(window="auto", **SMALL).fit(X, y)
    assert est.window_ > 1 and est.dilation_ == 1
    assert est.module_ is not None and est.score(Xt, yt) >= 0.9
    single = cls(window=1, **SMALL).fit(X, y)
    assert single.score(Xt, yt) < 0.75  # the same values in another order
    B, yb = _bags()
    bag = cls(window="auto", **SMALL).fit(B, yb)
    assert (bag.window_, bag.dilation_) == (1, 1)
    # a bag fit keeps single elements: exactly the fit with window=1
    np.testing.assert_allclose(bag.predict_proba(B), cls(window=1, **SMALL).fit(B, yb)
                               .predict_proba(B), atol=1e-6)


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


def test_a_fresh_fit_chooses_again():
    X, y = _ramps()
    est = DeepSetsClassifier(window="auto", **SMALL).fit(X, y)
    assert est.window_ > 1
    B, yb = _bags()
    short = [b[:2] for b in B]  # shorter than the first fit's window: a fresh fit checks them
    assert est.fit(short, yb).window_ == 1
    with pytest.raises(ValueError, match="window"):
        DeepSetsClassifier(window=5, **SMALL).fit(short, yb)
