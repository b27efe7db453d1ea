"""The supervised OTK models read k-mers through the Nystrom map's coding (``kmer_coding``:
``"plain"``, the concatenated elements; ``"level_shape"`` as :class:`NystromFeatures`, the
classifier's default; the regressor's is ``"plain"``)."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone

from skset import NystromFeatures, OTKClassifier, OTKRegressor
from skset._sets import pack

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _bumps(n, seed):
    # class = the shape of a bump (up or down) at a random level per series: plain k-mers see
    # mostly the level, coded k-mers the shape
    r = np.random.default_rng(seed)
    t = np.linspace(-1, 1, 24)
    X, y = [], []
    for i in range(n):
        bump = np.exp(-((t - r.uniform(-0.5, 0.5)) ** 2) / 0.05) * (1 if i % 2 else -1)
        X.append((r.normal(0, 8) + bump + 0.05 * r.normal(size=24))[:, None])
        y.append(i % 2)
    return X, np.array(y)


# no positions, the paper's epsilon: the codings compared alone (the bump's place is random
# anyway; with epsilon="auto" the plain k-mers' start, 0.61 out of fold at 0.5, takes 0.1: 0.96)
KW = dict(n_components=16, window=6, n_supports=4, max_iter=5, random_state=0, device="cpu",
          position_sigma=None, epsilon=0.5)


def test_coded_kmers_find_shapes_at_random_levels():
    Xtr, ytr = _bumps(80, 0)
    Xte, yte = _bumps(80, 1)
    coded = OTKClassifier(**KW).fit(Xtr, ytr)  # the default
    plain = OTKClassifier(kmer_coding="plain", **KW).fit(Xtr, ytr)
    assert coded.nystrom_.kmer_coding == "level_shape"
    assert coded.module_.element_map.kmer_coding == "level_shape"
    assert plain.module_.element_map.kmer_coding == "plain"
    assert coded.score(Xte, yte) >= 0.9 and coded.score(Xte, yte) > plain.score(Xte, yte) + 0.15


@pytest.mark.parametrize("coding", ["level_shape", "plain"])
def test_the_network_map_is_the_fitted_nystrom_map(coding):
    X, y = _bumps(30, 2)
    # no training step moves the map: the network's layer is the map fitted at initialisation
    kw = {**KW, "max_iter": 1}
    est = OTKRegressor(kmer_coding=coding, dtype="float64", learning_rate_init=1e-12, **kw)
    est.fit(X, y.astype(float))
    Xp, M = pack(X[:4], dtype=torch.float64)
    with torch.no_grad():
        psi, mask = est.module_.element_map(Xp, M)
    ref = est.nystrom_.transform(X[:4])
    for i, r in enumerate(ref):
        np.testing.assert_allclose(psi[i][mask[i]].numpy(), r, rtol=1e-6, atol=1e-8)
    # the same map NystromFeatures fits with that coding
    assert isinstance(est.nystrom_, NystromFeatures) and est.nystrom_.kmer_coding == coding


def test_defaults():
    assert OTKClassifier().kmer_coding == "level_shape"
    assert OTKRegressor().kmer_coding == "plain"


def test_parameter_in_clone_and_old_models_keep_plain_kmers():
    X, y = _bumps(30, 3)
    est = OTKClassifier(kmer_coding="plain", **KW)
    assert clone(est).get_params()["kmer_coding"] == "plain"
    est.fit(X, y)
    expected = est.predict_proba(X)
    state = dict(est.__getstate__())
    del state["kmer_coding"]  # a model saved before the parameter existed
    old = OTKClassifier.__new__(OTKClassifier)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old.__setstate__(state)
    assert old.kmer_coding == "plain"
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(old)).predict_proba(X), expected)
    with pytest.raises(ValueError, match="kmer_coding"):
        OTKClassifier(kmer_coding="shape").fit(X, y)
