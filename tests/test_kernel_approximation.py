import numpy as np
import pytest
import torch
from sklearn.kernel_approximation import Nystroem
from sklearn.utils.estimator_checks import parametrize_with_checks

from skset import NystromFeatures
from skset.nn import NystromLayer


@parametrize_with_checks(
    [NystromFeatures(n_components=5, random_state=0)],
    expected_failed_checks=lambda est: {
        # as for scikit-learn's KMeans: k-means++ and the bandwidth's random pairs draw from the
        # rows, so a repeated row and a weight of 2 get different draws (same in expectation);
        # tests/test_mass.py checks the identity where the draws cannot matter
        "check_sample_weight_equivalence_on_dense_data": "random draws over rows"})
def test_sklearn_checks_on_2d_arrays(estimator, check):
    check(estimator)


def test_matches_sklearn_nystroem_on_same_anchors(rng):
    X = rng.normal(size=(200, 5))
    nf = NystromFeatures(n_components=20, standardize=False, normalize=False, bandwidth=1.0,
                         eigenvalue_floor=0.0, dtype="float64", random_state=0).fit(X)
    gamma = 1.0 / (2 * nf.bandwidth_**2)
    sk = Nystroem(kernel="rbf", gamma=gamma, n_components=20, random_state=0).fit(nf.anchors_)
    ours, theirs = nf.transform(X), sk.transform(X)
    # same map up to the order of the anchors: compare Gram matrices
    np.testing.assert_allclose(ours @ ours.T, theirs @ theirs.T, atol=1e-8)


def test_approximates_kernel_on_anchor_span(rng):
    X = rng.normal(size=(300, 3))
    nf = NystromFeatures(n_components=100, standardize=False, normalize=True, bandwidth=0.6,
                         keep_norm=False,
                         eigenvalue_floor=1e-10, dtype="float64", random_state=0).fit(X)
    Z = nf.transform(X[:50])
    U = X[:50] / np.linalg.norm(X[:50], axis=1, keepdims=True)
    K = np.exp((U @ U.T - 1) / 0.36)
    assert np.abs(Z @ Z.T - K).max() < 0.05


def test_list_in_list_out_and_forms(rng):
    sets = [rng.normal(size=(n, 3)) for n in (4, 9, 2)]
    nf = NystromFeatures(n_components=8, random_state=0).fit(sets)
    out = nf.transform(sets)
    assert isinstance(out, list) and [o.shape for o in out] == [(4, 8), (9, 8), (2, 8)]
    assert out[0].dtype == np.float32
    arr = rng.normal(size=(5, 6, 3))
    assert nf.transform(arr).shape == (5, 6, 8)
    flat = nf.transform(np.concatenate(sets))
    np.testing.assert_allclose(np.concatenate(out), flat, rtol=1e-5, atol=1e-6)
    assert nf.get_feature_names_out().shape == (8,)


def test_kmer_window_matches_naive(rng):
    sets = [rng.normal(size=(n, 2)) for n in (5, 3, 8)]
    nf = NystromFeatures(n_components=6, window=3, normalize=True, keep_norm=True,
                         dtype="float64", random_state=0).fit(sets)
    out = nf.transform(sets)
    assert [o.shape[0] for o in out] == [3, 1, 6]
    # naive: standardise, build each 3-mer with a loop, normalise, kernel, K^-1/2
    s = sets[2]
    z = (s - nf.mean_) / nf.scale_
    kmers = np.stack([z[i : i + 3].reshape(-1) for i in range(len(z) - 2)])
    norms = np.linalg.norm(kmers, axis=1, keepdims=True)
    kmers /= norms
    d2 = ((kmers[:, None] - nf.anchors_[None]) ** 2).sum(-1)
    naive = norms * (np.exp(-d2 / (2 * nf.bandwidth_**2)) @ nf.normalization_)  # keep_norm
    np.testing.assert_allclose(out[2], naive, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="window"):
        nf.transform([rng.normal(size=(2, 2))])
    # the default map: no projection, bandwidth relative to the median distance of k-mers
    nf = NystromFeatures(n_components=6, window=3, dtype="float64", random_state=0).fit(sets)
    z = (s - nf.mean_) / nf.scale_
    kmers = np.stack([z[i : i + 3].reshape(-1) for i in range(len(z) - 2)])
    d2 = ((kmers[:, None] - nf.anchors_[None]) ** 2).sum(-1)
    naive = np.exp(-d2 / (2 * nf.bandwidth_**2)) @ nf.normalization_
    np.testing.assert_allclose(nf.transform(sets)[2], naive, rtol=1e-9, atol=1e-12)


def test_to_module_matches(rng):
    sets = [rng.normal(size=(n, 3)) for n in (6, 4, 9)]
    nf = NystromFeatures(n_components=7, window=2, dtype="float64", random_state=0).fit(sets)
    layer = nf.to_module()
    from skset._sets import pack

    X, M = pack(sets, dtype=torch.float64)
    with torch.no_grad():
        out, M2 = layer(X, M)
    for b, ref in enumerate(nf.transform(sets)):
        np.testing.assert_allclose(out[b, : ref.shape[0]].numpy(), ref, rtol=1e-9, atol=1e-12)
        assert M2[b].sum().item() == ref.shape[0]


def test_layer_and_estimator_share_default_parameters(rng):
    """NystromLayer and NystromFeatures built with defaults compute the same map (both take the
    DEFAULT_* constants of skset.nn.nystrom); the layer used to default to bandwidth 0.6 and
    keep_norm=False."""
    import inspect

    from skset import OTKClassifier

    layer = inspect.signature(NystromLayer).parameters
    est = inspect.signature(NystromFeatures).parameters
    shared = (set(layer) & set(est)) - {"anchors"}  # a tensor in the layer, a strategy here
    assert {"n_components", "bandwidth", "window", "normalize", "keep_norm",
            "eigenvalue_floor"} <= shared
    for name in sorted(shared):
        assert layer[name].default == est[name].default, name
    # the supervised model: n_components follows too (its bandwidth is the paper's supervised
    # 0.5 on purpose, see its docstring)
    assert OTKClassifier().n_components == NystromFeatures().n_components
    # a default layer given the estimator's anchors and standardisation gives its numbers
    sets = [rng.normal(size=(n, 3)) for n in (6, 4, 9)]
    nf = NystromFeatures(n_components=5, dtype="float64", random_state=0).fit(sets)
    # (the estimator's default bandwidth is relative to the data's scale: bandwidth_ is absolute)
    layer = NystromLayer(3, 5, bandwidth=nf.bandwidth_, anchors=torch.as_tensor(nf.anchors_)
                         ).double()
    layer.mean.copy_(torch.as_tensor(nf.mean_))
    layer.scale.copy_(torch.as_tensor(nf.scale_))
    with torch.no_grad():
        out = layer(torch.as_tensor(sets[2])[None])[0][0].numpy()
    np.testing.assert_allclose(out, nf.transform(sets)[2], rtol=1e-9, atol=1e-12)


def test_determinism_and_no_mutation(rng):
    sets = [rng.normal(size=(n, 3)) for n in (6, 4, 9)]
    before = [s.copy() for s in sets]
    a = NystromFeatures(n_components=5, random_state=3).fit(sets).transform(sets)
    b = NystromFeatures(n_components=5, random_state=3).fit(sets).transform(sets)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    for s, t in zip(sets, before):
        np.testing.assert_array_equal(s, t)


@pytest.mark.parametrize("param, value", [("n_components", 0), ("bandwidth", -1.0),
                                          ("window", 0), ("anchors", "foo"),
                                          ("eigenvalue_floor", 2.0)])
def test_bad_params(rng, param, value):
    with pytest.raises(ValueError, match=param):
        NystromFeatures(**{param: value}).fit([rng.normal(size=(5, 2))])


def test_too_few_elements_warns(rng):
    with pytest.warns(UserWarning, match="distinct"):
        nf = NystromFeatures(n_components=50).fit([rng.normal(size=(5, 2))])
    assert nf.n_components_ == 5
