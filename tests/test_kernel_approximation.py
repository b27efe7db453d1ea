import warnings

import numpy as np
import pytest
import torch
from sklearn.kernel_approximation import Nystroem
from sklearn.utils.estimator_checks import parametrize_with_checks

from skset import NystromFeatures
from skset._offsets import OFFSET_RATIO
from skset._sets import pack
from skset.datasets import make_motif_order
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
                         kmer_coding="plain", dtype="float64", random_state=0).fit(sets)
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
    # a fitted map reads a set shorter than its k-mers as one k-mer, its last element repeated
    short = rng.normal(size=(2, 2))
    np.testing.assert_array_equal(nf.transform([short])[0], nf.transform([short[[0, 1, 1]]])[0])
    with pytest.raises(ValueError, match="set 0 has 2 elements, fewer than the k-mer window"):
        NystromFeatures(n_components=2, window=3).fit([short, sets[0]])
    # the default map: no projection, bandwidth relative to the median distance of k-mers
    nf = NystromFeatures(n_components=6, window=3, kmer_coding="plain", dtype="float64",
                         random_state=0).fit(sets)
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
    from skset._map_selection import DEFAULT_CHOICE

    for name in sorted(shared):
        if name in ("window", "dilation"):  # chosen in fit from labels; without labels 1
            assert est[name].default == "auto" and layer[name].default == 1
        elif est[name].default == "auto":  # chosen in fit; without labels, the fixed choice
            assert layer[name].default == DEFAULT_CHOICE[name], name
        else:
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


# -- the element map chosen from the data ("auto") -------------------------------------------------
def _norm_bags(rng, n_sets=80, d=6):
    """Bags whose class is only in the elements' norms (directions uniform on the sphere)."""
    y = np.arange(n_sets) % 2
    sets = []
    for label in y:
        n = rng.integers(8, 16)
        u = rng.normal(size=(n, d))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        r = rng.uniform(0.5, 1.5, size=(n, 1)) * (2.0 if label else 1.0)
        sets.append(u * r)
    return sets, y


def _direction_bags(rng, n_sets=80, d=6):
    """Bags whose class is only in the elements' directions (norms heavy-tailed, class-free)."""
    y = np.arange(n_sets) % 2
    sets = []
    for label in y:
        n = rng.integers(8, 16)
        u = rng.normal(size=(n, d))
        u[:, 0] += 0.5 if label else -0.5  # class 1 leans towards +e0, class 0 towards -e0
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        r = np.exp(rng.normal(0.0, 2.0, size=(n, 1)))  # log-normal norms: noise
        sets.append(u * r)
    return sets, y


def test_auto_keeps_norms_when_the_class_is_in_the_norms(rng):
    """Projecting on the sphere without the norm would erase the class: "auto" must not."""
    sets, y = _norm_bags(rng)
    nf = NystromFeatures(n_components=32, random_state=0).fit(sets, y)
    assert not (nf.normalize_ and not nf.keep_norm_)
    scores = {tuple(c.values()): s for c, s in nf.selection_scores_}
    blind = max(s for c, s in nf.selection_scores_ if c["normalize"] and not c["keep_norm"])
    assert scores[tuple(nf_choice(nf).values())] > blind


def nf_choice(nf):
    return {"standardize": nf.standardize_, "normalize": nf.normalize_, "keep_norm": nf.keep_norm_,
            "bandwidth": nf.relative_bandwidth_}


def test_auto_drops_norms_when_the_class_is_in_the_directions(rng):
    """Heavy-tailed norms carry no class: "auto" projects on the sphere and drops the norm."""
    sets, y = _direction_bags(rng)
    nf = NystromFeatures(n_components=32, random_state=0).fit(sets, y)
    assert nf.normalize_ and not nf.keep_norm_


def test_auto_choice_is_better_than_the_wrong_one_downstream(rng):
    """What "auto" picks separates held-out bags better than the opposite choice (mean pooling)."""
    from sklearn.linear_model import LogisticRegression

    for make, wrong in ((_norm_bags, {"normalize": True, "keep_norm": False}),
                        (_direction_bags, {"normalize": False})):
        sets, y = make(rng, n_sets=160)
        tr, te = slice(0, 100), slice(100, None)
        accs = []
        for params in ({}, wrong):
            nf = NystromFeatures(n_components=32, random_state=0, **params).fit(sets[tr], y[tr])
            pooled = np.stack([f.mean(0) for f in nf.transform(sets)])
            clf = LogisticRegression(max_iter=2000).fit(pooled[tr], y[tr])
            accs.append(clf.score(pooled[te], y[te]))
        assert accs[0] > accs[1] + 0.1, (make.__name__, accs)


def test_auto_without_labels_is_the_fixed_default(rng):
    from skset._map_selection import DEFAULT_CHOICE

    sets = [rng.normal(size=(n, 3)) for n in (6, 4, 9)]
    nf = NystromFeatures(n_components=5, random_state=0).fit(sets)
    assert nf_choice(nf) == DEFAULT_CHOICE and nf.selection_scores_ is None
    explicit = NystromFeatures(n_components=5, random_state=0, **DEFAULT_CHOICE).fit(sets)
    np.testing.assert_array_equal(nf.anchors_, explicit.anchors_)
    assert nf.bandwidth_ == explicit.bandwidth_


def test_explicit_values_are_kept_and_searchable(rng):
    """Explicit values are never overridden; only the "auto" ones are searched."""
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline

    from skset import OTKEmbedding

    sets, y = _direction_bags(rng, n_sets=40)
    nf = NystromFeatures(n_components=16, normalize=False, random_state=0).fit(sets, y)
    assert nf.normalize_ is False
    assert all(not c["normalize"] for c, _ in nf.selection_scores_)
    nf = NystromFeatures(n_components=16, standardize=True, normalize=True, keep_norm=True,
                         bandwidth=0.7, random_state=0).fit(sets, y)
    assert nf.selection_scores_ is None and nf.bandwidth_ == 0.7  # absolute on the sphere
    from sklearn.linear_model import LogisticRegression

    pipe = Pipeline([("nys", NystromFeatures(n_components=8, random_state=0)),
                     ("otk", OTKEmbedding(n_supports=2, random_state=0)),
                     ("clf", LogisticRegression())])
    search = GridSearchCV(pipe, {"nys__normalize": ["auto", False]}, cv=2).fit(sets, y)
    assert search.best_params_["nys__normalize"] in ("auto", False)


def test_auto_prints_its_choice_when_verbose(rng, capsys):
    sets, y = _norm_bags(rng, n_sets=20)
    NystromFeatures(n_components=8, random_state=0, verbose=1).fit(sets, y)
    assert "chosen on y" in capsys.readouterr().out


def test_auto_on_a_pool_of_labelled_rows(rng):
    """A 2-D pool with one label per row: each row is a set of one; regression targets too."""
    X = rng.normal(size=(120, 3))
    nf = NystromFeatures(n_components=10, random_state=0).fit(X, (X[:, 0] > 0).astype(int))
    assert nf.selection_scores_ is not None
    nf = NystromFeatures(n_components=10, random_state=0).fit(X, X[:, 0] * 2.0)
    assert nf.selection_scores_ is not None and nf.transform(X).shape == (120, 10)


@pytest.mark.parametrize("max_sets", [600, 50])
def test_pool_is_scored_as_its_rows_as_sets_of_one(rng, monkeypatch, max_sets):
    """The choice on a labelled 2-D pool is the choice on its rows given as sets of one, also
    above ``MAX_SETS`` rows (both forms sampled by one rule)."""
    monkeypatch.setattr("skset._map_selection.MAX_SETS", max_sets)
    y = rng.integers(0, 3, 120)
    X = rng.normal(size=(120, 3)) + 0.5 * y[:, None]
    pool = NystromFeatures(n_components=8, random_state=0).fit(X, y)
    rows = NystromFeatures(n_components=8, random_state=0).fit(list(X[:, None, :]), y)
    assert pool.selection_scores_ is not None
    assert pool.selection_scores_ == rows.selection_scores_


def test_defect_05_weight_scale_does_not_move_the_fit(rng):
    """Issue 27, defect 5: multiplying every sample_weight by one constant (1e39, 1e-46) gave
    another bandwidth_ (the weighted median under/overflowed); scale-free weights fit alike."""
    sets = [rng.normal(size=(n, 3)) for n in (6, 4, 9, 7)]
    sw = np.array([0.5, 2.0, 1.0, 3.0])
    fits = [NystromFeatures(n_components=5, random_state=0).fit(sets, sample_weight=sw * c)
            for c in (1.0, 1e39, 1e-46)]
    for nf in fits[1:]:
        assert nf.bandwidth_ == fits[0].bandwidth_
        np.testing.assert_allclose(nf.anchors_, fits[0].anchors_, rtol=1e-6)


def test_defect_10_fit_and_transform_agree_on_tiny_magnitudes(rng):
    """Issue 27, defect 10: data of magnitude 1e-30 fitted fine and then transform failed
    ("too large for float32"). Standardised (the default) it now maps like the same data at
    scale 1; without standardisation fit itself refuses it with the reason."""
    sets = [rng.normal(size=(n, 3)) for n in (6, 4, 9)]
    tiny = [s * 1e-30 for s in sets]
    nf = NystromFeatures(n_components=5, random_state=0).fit(tiny)
    ref = NystromFeatures(n_components=5, random_state=0).fit(sets)
    np.testing.assert_allclose(np.concatenate(nf.transform(tiny)),
                               np.concatenate(ref.transform(sets)), rtol=1e-3, atol=1e-5)
    with pytest.raises(ValueError, match="standardise the features"):
        NystromFeatures(n_components=5, standardize=False, random_state=0).fit(tiny)


def test_auto_that_picks_a_choice_fits_like_that_choice_given(rng):
    """The choice draws from its own random stream: picking values = giving them explicitly."""
    sets, y = _direction_bags(rng, n_sets=40)
    nf = NystromFeatures(n_components=16, random_state=3).fit(sets, y)
    explicit = NystromFeatures(n_components=16, random_state=3, standardize=nf.standardize_,
                               normalize=nf.normalize_, keep_norm=nf.keep_norm_).fit(sets)
    if not nf.normalize_:  # an explicit bandwidth is relative off the sphere: give it too
        explicit.set_params(bandwidth=nf.relative_bandwidth_).fit(sets)
    else:
        explicit = NystromFeatures(n_components=16, random_state=3, standardize=nf.standardize_,
                                   normalize=True, keep_norm=nf.keep_norm_,
                                   bandwidth=nf.bandwidth_).fit(sets)
    np.testing.assert_array_equal(nf.anchors_, explicit.anchors_)
    assert nf.bandwidth_ == pytest.approx(explicit.bandwidth_, rel=1e-12)


@pytest.mark.parametrize("n, p", [(30, 8), (12, 20)])
def test_loo_ridge_errors_match_a_naive_loop(rng, n, p):
    """The closed-form leave-one-out errors of the map choice equal refitting scikit-learn's
    Ridge without each sample in turn (both shapes of the Gram matrix)."""
    from sklearn.linear_model import Ridge

    from skset._map_selection import loo_ridge_errors

    F = rng.normal(size=(n, p))
    Y = np.eye(3)[rng.integers(0, 3, n)]
    Fc = F - F.mean(0)
    ref = (np.linalg.svd(Fc, compute_uv=False) ** 2).mean()
    for a in (0.1, 10.0):
        errors = loo_ridge_errors(F, Y, alphas=[a])
        naive = []
        for i in range(n):
            keep = np.arange(n) != i
            model = Ridge(alpha=a * ref).fit(F[keep], Y[keep])
            naive.append(((Y[i] - model.predict(F[i : i + 1])[0]) ** 2).sum())
        np.testing.assert_allclose(errors, naive, rtol=1e-6)


# -- k-mers coded as level + shape (the default with window > 1) --------------------------------
def test_level_shape_coding_matches_naive_and_inverts(rng):
    from skset._sets import kmer_level_shape
    from skset.nn import kmer_level_shape as torch_level_shape
    from skset.nn import kmer_unfold

    sets = [rng.normal(size=(n, 2)) for n in (5, 3, 8)]
    coded = kmer_level_shape(sets, 3)
    s = sets[2]
    for i in range(len(s) - 2):
        w = s[i : i + 3]
        level = w.mean(0)
        np.testing.assert_allclose(coded[2][i], np.r_[(w - level).reshape(-1), level])
        # invertible: the k-mer is the shape plus the level
        np.testing.assert_allclose(coded[2][i][:6].reshape(3, 2) + coded[2][i][6:], w)
    X, M = pack(sets, dtype=torch.float64)
    T = torch_level_shape(*kmer_unfold(X, M, 3)[:1], 3)
    _, mask = kmer_unfold(X, M, 3)
    for i, c in enumerate(coded):
        np.testing.assert_allclose(T[i][mask[i]].numpy(), c, rtol=0, atol=1e-12)


def test_level_shape_estimator_matches_naive_layer_and_plain_when_asked(rng):
    sets = [np.cumsum(rng.normal(size=(n, 2)), 0) for n in (6, 4, 9, 7)]
    nf = NystromFeatures(n_components=6, window=3, dtype="float64", random_state=0).fit(sets)
    assert nf.kmer_coding == "level_shape" and nf.mean_.shape == (8,)
    assert nf.anchors_.shape == (6, 8)
    out = nf.transform(sets)
    assert [o.shape for o in out] == [(4, 6), (2, 6), (7, 6), (5, 6)]
    # naive: code each 3-mer, standardise the coded features, kernel, K^-1/2
    s = sets[2]
    kmers = np.stack([np.r_[(s[i:i + 3] - s[i:i + 3].mean(0)).reshape(-1), s[i:i + 3].mean(0)]
                      for i in range(len(s) - 2)])
    z = (kmers - nf.mean_) / nf.scale_
    d2 = ((z[:, None] - nf.anchors_[None]) ** 2).sum(-1)
    naive = np.exp(-d2 / (2 * nf.bandwidth_**2)) @ nf.normalization_
    np.testing.assert_allclose(out[2], naive, rtol=1e-9, atol=1e-12)
    # the layer computes the same map
    X, M = pack(sets, dtype=torch.float64)
    feats, mask = nf.to_module()(X, M)
    np.testing.assert_allclose(feats[mask].detach().numpy(), np.concatenate(out), atol=1e-10)
    # window=1: nothing to code; plain k-mers on request
    one = NystromFeatures(n_components=6, dtype="float64", random_state=0).fit(sets)
    assert one.mean_.shape == (2,)
    plain = NystromFeatures(n_components=6, window=3, kmer_coding="plain", dtype="float64",
                            random_state=0).fit(sets)
    assert plain.mean_.shape == (2,) and plain.anchors_.shape == (6, 6)


def test_level_shape_finds_shapes_at_random_levels(rng):
    # class = the shape of a bump (up or down), at a random level per series: plain k-mers see
    # mostly the level; coded k-mers see the shape
    from sklearn.linear_model import LogisticRegression

    from skset import OTKEmbedding

    def series(n, seed):
        r = np.random.default_rng(seed)
        X, y = [], []
        t = np.linspace(-1, 1, 24)
        for i in range(n):
            cls = i % 2
            bump = np.exp(-((t - r.uniform(-0.5, 0.5)) ** 2) / 0.05) * (1 if cls else -1)
            x = r.normal(0, 8) + bump + 0.05 * r.normal(size=24)
            X.append(x[:, None])
            y.append(cls)
        return X, np.array(y)

    Xtr, ytr = series(80, 0)
    Xte, yte = series(80, 1)
    acc = {}
    for coding in ("plain", "level_shape"):
        nys = NystromFeatures(n_components=16, window=6, kmer_coding=coding, standardize=True,
                              normalize=False, keep_norm=False, bandwidth=0.5, random_state=0)
        otk = OTKEmbedding(n_supports=4, random_state=0)
        Ftr = otk.fit_transform(nys.fit_transform(Xtr))
        Fte = otk.transform(nys.transform(Xte))
        acc[coding] = LogisticRegression(max_iter=2000).fit(Ftr, ytr).score(Fte, yte)
    assert acc["level_shape"] >= 0.9 and acc["level_shape"] > acc["plain"] + 0.15, acc


def test_level_shape_in_searches_and_old_models():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    from skset import OTKEmbedding

    rng = np.random.default_rng(0)
    X = [np.cumsum(rng.normal(size=(12, 1)), 0) for _ in range(30)]
    y = np.arange(30) % 2
    pipe = make_pipeline(NystromFeatures(n_components=6, window=3, random_state=0),
                         OTKEmbedding(n_supports=2, random_state=0), LogisticRegression())
    gs = GridSearchCV(pipe, {"nystromfeatures__kmer_coding": ["plain", "level_shape"]},
                      cv=2).fit(X, y)
    assert len(gs.cv_results_["params"]) == 2
    # a model pickled before the parameter existed keeps plain k-mers
    nf = NystromFeatures(n_components=6, window=3, kmer_coding="plain", random_state=0).fit(X)
    state = nf.__getstate__()
    del state["kmer_coding"]
    old = NystromFeatures.__new__(NystromFeatures)
    old.__setstate__(state)
    assert old.kmer_coding == "plain"
    np.testing.assert_array_equal(np.concatenate(old.transform(X)),
                                  np.concatenate(nf.transform(X)))


# -- issue 34: a given y is checked as every estimator checks it; thresholds relative to the scale
def _labelled(n=40, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    return [rng.normal(loc=0.6 * c, size=(int(rng.integers(4, 10)), 3)) for c in y], y


@pytest.mark.parametrize("bad, match", [
    ("short", "y has 39 entries but X holds 40 sets"),
    ("nan", "y contains NaN or infinity"),
    ("inf", "y contains NaN or infinity"),
    ("scalar", "y is a scalar"),
    ("3-d", r"y has shape \(40, 1, 2\)"),
    ("2-d-short", "y has 39 entries but X holds 40 sets"),
    ("mixed", r"y mixes label types \['number', 'str'\]"),
])
def test_d8_nystrom_checks_a_given_y(bad, match):
    """D8: a y that is given is checked as every estimator checks it (was: silently taken as
    "no labels"); mixed str/int labels are a TypeError naming y."""
    X, y = _labelled()
    yb = {"short": y[:-1], "nan": np.where(y == 1, np.nan, 0.0),
          "inf": np.where(y == 1, np.inf, 0.0), "scalar": np.array(1.0),
          "3-d": np.zeros((40, 1, 2)), "2-d-short": np.zeros((39, 2)),
          "mixed": np.array(["a", 1] * 20, dtype=object)}[bad]
    with pytest.raises((ValueError, TypeError), match=match) as info:
        NystromFeatures(n_components=8, random_state=0, device="cpu").fit(X, yb)
    assert (info.type is TypeError) == (bad == "mixed")


def test_d8_valid_y_forms_still_fit():
    """Multi-output targets and per-element labels (ABCClusterer's instances after this step)
    remain valid and choose nothing; a 2-D pool takes one label per row."""
    X, y = _labelled()
    est = NystromFeatures(n_components=8, random_state=0, device="cpu")
    assert est.fit(X, np.stack([y, 1 - y], 1)).selection_scores_ is None
    assert est.fit(X, [np.zeros(len(x)) for x in X]).selection_scores_ is None
    assert est.fit(X, list(y)).selection_scores_ is not None
    pool = np.concatenate(X)
    est.fit(pool, np.arange(len(pool)) % 2)
    with pytest.raises(ValueError, match=rf"{len(y)} entries but X holds {len(pool)} rows \(a 2-D X "
                       r"is one pool of elements\); give one target per row"):
        est.fit(pool, y)


@pytest.mark.parametrize("kw", [{}, dict(standardize=False, normalize=True, keep_norm=False)],
                         ids=["auto", "sphere"])
@pytest.mark.parametrize("factor", [1e-13, 1e-6, 1e6, 1e30])
def test_d9_element_map_does_not_depend_on_the_scale(kw, factor):
    """D9: the same data times a factor (float64) gives the same choice and the same features
    (was: at 1e-13 the choice switched and the features moved by 0.8-0.99: absolute thresholds
    on raw elements)."""
    X, y = _labelled()
    make = dict(n_components=8, random_state=0, dtype="float64", device="cpu", **kw)
    ref = NystromFeatures(**make).fit(X, y)
    Xs = [x * factor for x in X]
    got = NystromFeatures(**make).fit(Xs, y)
    for name in ("standardize_", "normalize_", "keep_norm_", "relative_bandwidth_",
                 "n_components_"):
        assert getattr(got, name) == getattr(ref, name), name
    np.testing.assert_allclose(np.concatenate(got.transform(Xs)),
                               np.concatenate(ref.transform(X)), rtol=1e-10, atol=1e-10)


def _naive_map(nf, sets):
    """The map of NystromFeatures written out in float64 numpy, one set at a time: standardise,
    plain k-mers by a loop, project (and keep the norm), Gaussian kernel, times K^-1/2."""
    out = []
    for s in sets:
        z = (np.asarray(s, np.float64) - nf.mean_) / nf.scale_
        w = nf.window_
        z = np.stack([z[i : i + w].reshape(-1) for i in range(len(z) - w + 1)])
        norms = np.linalg.norm(z, axis=1, keepdims=True)
        if nf.normalize_:
            z = z / norms
        d2 = ((z[:, None] - nf.anchors_[None].astype(np.float64)) ** 2).sum(-1)
        psi = np.exp(-d2 / (2 * nf.bandwidth_**2)) @ nf.normalization_.astype(np.float64)
        out.append(psi * norms if nf.normalize_ and nf.keep_norm_ else psi)
    return out


@pytest.mark.parametrize("kw", [dict(standardize=False), dict(standardize=True),
                                dict(normalize=True, keep_norm=True),
                                dict(window=3, kmer_coding="plain", normalize=True,
                                     keep_norm=False, bandwidth=0.8)],
                         ids=["plain", "standardized", "sphere_norm", "kmers"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_long_sets_block_by_block_match_naive_and_sklearn(rng, monkeypatch, kw, dtype):
    """Long sets mapped in blocks of 64 rows (blocks straddle the sets) on 1 and 2 threads:
    the same numbers as a naive float64 loop and as scikit-learn's Nystroem given the same
    anchors, and exactly the same numbers whatever the thread count or the block size."""
    import skset
    from skset import _nystrom_rows as ka

    sets = [(rng.normal(size=(n, 4)) * 2 + 1).astype(dtype) for n in (700, 1300, 5, 451)]
    nf = NystromFeatures(n_components=24, random_state=0, dtype=dtype, **kw).fit(sets)
    whole = nf.transform(sets)  # the default blocks: these sets fit in one
    monkeypatch.setattr(ka, "CACHE_BYTES", 1)  # blocks of 64 rows
    with skset.config_context(n_threads=1):
        one = nf.transform(sets)
    with skset.config_context(n_threads=2):  # the blocks on two threads
        two = nf.transform(sets)
    tol = dict(rtol=1e-4, atol=2e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    for a, b, c, ref in zip(one, two, whole, _naive_map(nf, sets)):
        assert a.dtype == np.dtype(dtype) and a.shape == ref.shape
        np.testing.assert_array_equal(a, b)  # thread count: same rounding
        np.testing.assert_allclose(a, c, **tol)  # block size: float rounding only
        np.testing.assert_allclose(a, ref, **tol)
    if not (nf.window_ > 1 or nf.normalize_ or nf.standardize_):
        sk = Nystroem(kernel="rbf", gamma=1.0 / (2 * nf.bandwidth_**2),
                      n_components=24).fit(sets[0])
        sk.components_, sk.normalization_ = nf.anchors_, nf.normalization_
        pooled = np.concatenate(sets)
        np.testing.assert_allclose(np.concatenate(one), sk.transform(pooled), **tol)


def test_block_map_raises_on_non_finite_output():
    """The finite check of the blocks is wired in: an infinite row gives NaN, named."""
    from skset._nystrom_rows import map_rows

    x = torch.tensor([[1.0, 0.0], [float("inf"), 0.0]])
    w = torch.eye(2)
    with pytest.raises(ValueError, match="NystromFeatures produced non-finite"):
        map_rows(x, None, None, None, w, torch.eye(2), 1.0, normalize=False, keep_norm=False,
                  max_rows=1000, name="NystromFeatures")


def test_max_samples_auto_bounds_the_values_kmeans_sees(monkeypatch):
    # "auto": 100,000 rows, fewer for wide rows (at most MAX_SAMPLE_VALUES values, never fewer
    # rows than centres); an explicit value is kept as given
    import skset._weighting as wt
    import skset.embedding._references as refs
    import skset.kernel_approximation as ka
    from skset import OTKEmbedding

    assert NystromFeatures().max_samples == "auto" and OTKEmbedding().max_samples == "auto"
    assert wt.resolve_max_samples("auto", 120, 128) == wt.AUTO_MAX_SAMPLES
    assert wt.resolve_max_samples("auto", 1320, 128) == wt.MAX_SAMPLE_VALUES // 1320 == 25420
    assert wt.resolve_max_samples("auto", 10**9, 64) == 64
    assert wt.resolve_max_samples(500, 1320, 128) == 500
    monkeypatch.setattr(wt, "MAX_SAMPLE_VALUES", 10 * 6 * 4)  # 40 rows of 6 features
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(30, 3)) for _ in range(10)]
    seen = []

    def fit(real):
        def counted(self, Z, *args, **kwargs):
            seen.append(Z.shape)
            return real(self, Z, *args, **kwargs)
        return counted

    monkeypatch.setattr(ka.KMeans, "fit", fit(ka.KMeans.fit))
    NystromFeatures(n_components=8, window=2, kmer_coding="plain", random_state=0).fit(X)
    NystromFeatures(n_components=8, window=2, kmer_coding="plain", max_samples=100,
                    random_state=0).fit(X)
    assert seen == [(40, 6), (100, 6)]
    seen.clear()
    assert refs.KMeans is ka.KMeans  # the references' k-means: the same counted fit
    OTKEmbedding(n_supports=3, random_state=0).fit([np.hstack([x, x]) for x in X])
    assert seen == [(40, 6)]


def test_has_distinct_rows_agrees_with_distinct_rows():
    # the keyed count never claims more distinct rows than np.unique counts; here (no key
    # shared by two distinct rows) it says exactly what the exact count says, at the boundary
    from skset._map_selection import distinct_rows, has_distinct_rows

    rng = np.random.default_rng(0)
    base = rng.normal(size=(40, 5))
    cases = [
        base,
        base[rng.integers(0, 7, size=60)],  # 7 distinct rows, repeated
        np.vstack([base[:5], base[:5] * (1 + 1e-14)]),  # equal to 12 significant digits
        np.vstack([np.zeros((3, 4)), -np.zeros((3, 4)), np.eye(4)]),  # -0.0 is 0.0
        base.astype(np.float32)[rng.integers(0, 9, size=30)],
        np.zeros((0, 3)),
        # structures that summed bits would key alike: a row and its negative (two sign bits
        # cancel modulo 2**64), and 0/1 rows (every value's bits a multiple of 2**52)
        np.vstack([base[:, :2], -base[:, :2]]),
        np.unique(rng.integers(0, 2, size=(3000, 14)), axis=0).astype(float),
    ]
    for x in cases:
        n = len(distinct_rows(x))
        for m in (1, n - 1, n, n + 1):
            if m >= 1:
                assert has_distinct_rows(x, m, chunk=7) == (n >= m), (x.shape, n, m)


def test_fit_without_listing_distinct_rows_takes_the_same_anchors(monkeypatch):
    # with enough distinct elements the fit only checks that there are enough; the anchors are
    # those of the fit that lists them all; with too few it still lists them and warns
    import skset.kernel_approximation as ka

    rng = np.random.default_rng(1)
    X = [rng.normal(size=(int(rng.integers(20, 40)), 3)) for _ in range(15)]
    fast = NystromFeatures(n_components=10, random_state=0).fit(X)
    coded = NystromFeatures(n_components=10, window=3, random_state=0).fit(X)
    monkeypatch.setattr(ka, "has_distinct_rows", lambda x, m: False)
    listed = NystromFeatures(n_components=10, random_state=0).fit(X)
    coded_listed = NystromFeatures(n_components=10, window=3, random_state=0).fit(X)
    np.testing.assert_array_equal(fast.anchors_, listed.anchors_)
    np.testing.assert_array_equal(coded.anchors_, coded_listed.anchors_)
    assert fast.bandwidth_ == listed.bandwidth_
    monkeypatch.undo()
    few = [np.repeat(rng.normal(size=(2, 3)), 10, axis=0) for _ in range(3)]
    with pytest.warns(UserWarning, match="number of distinct training elements"):
        nf = NystromFeatures(n_components=10, random_state=0).fit(few)
    assert nf.n_components_ == 6


def test_set_output_pandas_leaves_the_sets_and_frames_the_pipeline():
    import sklearn
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skset import OTKEmbedding

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 8)), 3)) for _ in range(20)]
    plain = NystromFeatures(n_components=8, random_state=0).fit(X)
    nys = NystromFeatures(n_components=8, random_state=0).set_output(transform="pandas").fit(X)
    for a, b in zip(nys.transform(X), plain.transform(X)):  # one array per set, unchanged
        np.testing.assert_array_equal(a, b)
    pipe = make_pipeline(NystromFeatures(n_components=8, random_state=0),
                         OTKEmbedding(n_supports=3, random_state=0), StandardScaler())
    out = pipe.set_output(transform="pandas").fit(X).transform(X)
    assert out.shape == (20, 24) and list(out.columns) == list(pipe.get_feature_names_out())
    with sklearn.config_context(transform_output="pandas"):  # the global setting too
        framed = make_pipeline(NystromFeatures(n_components=8, random_state=0),
                               OTKEmbedding(n_supports=3, random_state=0)).fit(X).transform(X)
    arrays = make_pipeline(NystromFeatures(n_components=8, random_state=0),
                           OTKEmbedding(n_supports=3, random_state=0)).fit(X).transform(X)
    np.testing.assert_array_equal(framed.to_numpy(), arrays)


def test_reversed_and_read_only_single_arrays_map_as_their_copies():
    rng = np.random.default_rng(1)
    P = rng.normal(size=(60, 3))
    nys = NystromFeatures(n_components=8, random_state=0).fit(P)
    for view in (P[::-1], P[:, ::-1]):
        np.testing.assert_array_equal(nys.transform(view), nys.transform(view.copy()))
    x = rng.normal(size=(9, 3))
    sets = NystromFeatures(n_components=8, random_state=0).fit([x, x + 1])
    np.testing.assert_array_equal(sets.transform([x[::-1]])[0], sets.transform([x[::-1].copy()])[0])
    locked = x.copy()
    locked.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "not writable" warning
        np.testing.assert_array_equal(sets.transform([locked])[0], sets.transform([x])[0])


def test_too_few_anchors_warning_names_max_samples_when_it_binds():
    rng = np.random.default_rng(2)
    X = [rng.normal(size=(9, 2)) for _ in range(20)]  # 180 distinct elements
    with pytest.warns(UserWarning, match=r"\(3 among the 3 elements the anchors are drawn from, "
                      r"max_samples=3\); using 3 anchors"):
        NystromFeatures(n_components=8, max_samples=3, random_state=0).fit(X)
    with pytest.warns(UserWarning, match=r"reads them \(2\); using 2 anchors"):  # no draw binds
        NystromFeatures(n_components=8, random_state=0).fit([np.array([[0.0, 1.0], [1.0, 0.0]])])
    # k-mers, none drawn: it said "in the 32 drawn", comparing them with the 40 elements
    kmers = [rng.integers(0, 2, size=(10, 1)).astype(float) for _ in range(4)]
    with pytest.warns(UserWarning, match=r"among the 32 k-mers the anchors are drawn from, "
                      r"max_samples=auto\); using"):
        NystromFeatures(n_components=64, window=3, kmer_coding="plain", random_state=0).fit(kmers)


@pytest.mark.parametrize("scale", [1e-20, 1e-30])
def test_tiny_values_with_targets_choose_a_map_in_float32(scale):
    """A candidate map whose pooled proxy features are not finite (float32 on values near 1e-20)
    loses the choice instead of crashing the eigendecomposition of the leave-one-out proxy."""
    from skset import OTKRegressor

    rng = np.random.default_rng(3)
    X = [rng.normal(size=(int(rng.integers(3, 7)), 3)) * scale for _ in range(24)]
    y = rng.normal(size=24)
    for target in (y, (y > 0).astype(int)):
        nys = NystromFeatures(n_components=8, random_state=0).fit(X, target)
        assert all(np.all(np.isfinite(f)) for f in nys.transform(X))
    reg = OTKRegressor(n_components=8, max_iter=3, random_state=0).fit(X, y)
    assert np.all(np.isfinite(reg.predict(X)))


def test_float32_transform_keeps_features_far_from_zero():
    # features near 1e8 with a spread of 1: float32 standardisation in torch rounded their
    # variation away (the spacing of float32 numbers near 1e8 is 8); they are centred in float64
    # first, so a fitted map reads X + 1e8 (its mean_ moved by 1e8) as it reads X
    import copy

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 8)), 2)) for _ in range(30)]
    nf = NystromFeatures(n_components=8, standardize=True, random_state=0).fit(X)
    far = copy.deepcopy(nf)
    far.mean_ = (nf.mean_.astype(np.float64) + 1e8).astype(np.float32)
    shift = far.mean_.astype(np.float64) - nf.mean_  # what float32 holds of the 1e8
    Xf = [x + shift for x in X]
    np.testing.assert_allclose(np.concatenate(far.transform(Xf)), np.concatenate(nf.transform(X)),
                               atol=1e-5)


def test_a_ragged_nested_list_names_the_set():
    # np.ndim of a ragged first set raised numpy's own message before the set could be named
    for method in ("fit", "transform"):
        est = NystromFeatures(n_components=2, window=1, random_state=0)
        if method == "transform":
            est.fit([np.ones((3, 3)) * i for i in range(3)])
        with pytest.raises((ValueError, TypeError), match="set 0"):
            getattr(est, method)([[[1, 2, 3], [1, 2]], [[1, 2, 3]]])


@pytest.mark.parametrize("offset", [300.0, 1e3, 1e4])
def test_unstandardised_far_features_in_float32_are_read_less_their_mean(offset):
    """``standardize=False`` in float32 on features far from zero: the map reads them less their
    training mean (``mean_``; a Gaussian kernel reads differences only), so it is the map its
    fitted attributes define, computed in float64, to 1e-4; read as they were, the float32
    squared distances cancelled (0.06, 0.84 and 1.0 away at these offsets, features of range
    about 1). ``to_module()`` reads them so too. On the sphere (``normalize=True``) the shift
    would change the map: a warning instead, naming the features."""
    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(20, 2)) + np.array([offset, 0.0]) for _ in range(20)]
    nf = NystromFeatures(8, standardize=False, normalize=False, random_state=0).fit(sets)
    assert nf.mean_[0] == pytest.approx(offset, abs=1.0) and nf.mean_[1] == 0.0
    X = np.concatenate(sets)
    z, W = X - nf.mean_.astype(np.float64), nf.anchors_.astype(np.float64)
    K = np.exp(-((z[:, None, :] - W[None]) ** 2).sum(-1) / (2 * nf.bandwidth_**2))
    np.testing.assert_allclose(np.concatenate(nf.transform(sets)),
                               K @ nf.normalization_.astype(np.float64), atol=1e-4)
    Xp, M = pack(sets[:3], dtype=torch.float32)
    with torch.no_grad():
        psi = nf.to_module()(Xp, M)[0].numpy()
    np.testing.assert_allclose(psi, np.stack(nf.transform(sets[:3])), atol=2e-3)
    f64 = NystromFeatures(8, standardize=False, normalize=False, dtype="float64",
                          random_state=0).fit(sets)
    # float64 reads them as they are up to OFFSET_RATIO spreads, less their mean beyond
    assert f64.mean_[1] == 0.0 and f64.mean_[0] in (0.0, pytest.approx(offset, abs=1.0))
    assert (f64.mean_[0] != 0) == (offset > OFFSET_RATIO * np.concatenate(sets)[:, 0].std())
    with pytest.warns(UserWarning, match=r"features 0 sit more than 10 spreads from zero") as rec:
        NystromFeatures(8, standardize=False, normalize=True, random_state=0).fit(sets)
    assert {r.filename for r in rec if "spreads" in str(r.message)} == {__file__}


@pytest.mark.parametrize("offset", [1e6, 1e8])
def test_unstandardised_far_features_in_float64_are_read_less_their_mean(offset):
    """The same in float64 beyond ``OFFSET_RATIO`` spreads: fitted on the shifted sets the map
    equals the map of the unshifted fit (it was 0.001 away at 1e6 spreads and noise, 1.1, at
    1e8, where float64's squared distances cancel); and a float32 fit of features 900 from zero
    with a spread of 1e-3 reads them as the float64 fit does (0.03 away: its transform had
    tested the offset against ``scale_``, ones when unstandardised)."""
    rng = np.random.default_rng(0)
    base = [rng.normal(size=(20, 2)) for _ in range(6)]
    kw = dict(n_components=6, standardize=False, random_state=0)
    near = NystromFeatures(dtype="float64", **kw).fit(base)
    far = NystromFeatures(dtype="float64", **kw).fit([b + offset for b in base])
    np.testing.assert_allclose(np.vstack(far.transform([b + offset for b in base])),
                               np.vstack(near.transform(base)), atol=1e-6)
    tight = [900.0 + 1e-3 * b for b in base]
    f32, f64 = (NystromFeatures(dtype=d, **kw).fit(tight) for d in ("float32", "float64"))
    np.testing.assert_allclose(np.vstack(f32.transform(tight)), np.vstack(f64.transform(tight)),
                               atol=1e-4)


def test_transform_computes_in_the_fitted_dtype_and_a_refit_forgets_the_width():
    """``set_params(dtype=...)`` after a fit: ``transform`` computes in the fitted ``dtype_`` (as
    ``partial_fit`` refuses the change; it had computed far features in float32, 1.03 off); a
    refit does not read a former fit's ``window_`` (a pool of 10 rows was refused after a fit
    that took 20-mers, with ``sample_weight``)."""
    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(20, 2)) + 1e4 for _ in range(6)]
    nf = NystromFeatures(6, standardize=False, dtype="float64", random_state=0).fit(sets)
    Z = nf.transform(sets)
    nf.set_params(dtype="float32")
    np.testing.assert_array_equal(np.vstack(nf.transform(sets)), np.vstack(Z))
    X, y = make_motif_order(n_samples=60, min_length=40, max_length=60, random_state=0)
    est = NystromFeatures(16, random_state=0).fit(X, y)
    assert est.window_ > 10
    pool = rng.normal(size=(10, 4))
    est.fit(pool, sample_weight=np.ones(10))
    assert est.window_ == 1


@pytest.mark.parametrize("coding, other", [("level_shape", "plain"), ("plain", "level_shape")])
def test_transform_reads_the_fitted_kmer_coding(coding, other):
    """``set_params(kmer_coding=...)`` after a fit: ``transform`` and ``to_module`` read the k-mers
    the anchors were fitted on, as they read ``window_`` (a torch size error before); a later
    ``partial_fit`` refuses the change by name; a refit takes the new coding."""
    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(8, 2)) for _ in range(4)]
    nf = NystromFeatures(4, window=3, kmer_coding=coding, random_state=0).fit(sets)
    Z = nf.transform(sets)
    nf.set_params(kmer_coding=other)
    np.testing.assert_array_equal(np.vstack(nf.transform(sets)), np.vstack(Z))
    X, M = pack(sets, dtype=torch.float32)
    with torch.no_grad():
        out, out_mask = nf.to_module()(X, M)
    np.testing.assert_allclose(out[out_mask].numpy(), np.vstack(Z), atol=1e-5)
    with pytest.raises(ValueError, match="kmer_coding"):
        nf.partial_fit(sets)
    assert nf.fit(sets).anchors_.shape[1] == (6 if other == "plain" else 8)

def test_pools_as_frames_and_tensors_are_read_as_estimators_read_them():
    """A pandas frame as one pool keeps its column names (``feature_names_in_``; other columns
    refused later: it was read as an array, and reordered columns moved the features by 0.96);
    tensors that require grad, or in bfloat16, are read detached (a torch error before)."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(50, 3)), columns=list("abc"))
    nf = NystromFeatures(8, random_state=0).fit(df)
    assert list(nf.feature_names_in_) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="feature names"):
        nf.transform(df[["c", "b", "a"]])
    np.testing.assert_array_equal(nf.transform(df), nf.transform(df.to_numpy()))
    X = torch.randn(3, 4, 3)
    nf = NystromFeatures(4, random_state=0).fit(X)
    np.testing.assert_array_equal(nf.transform(X.clone().requires_grad_(True)), nf.transform(X))
    assert NystromFeatures(4, random_state=0).fit(X.to(torch.bfloat16)).n_features_in_ == 3


def test_rows_of_weight_zero_take_no_part_in_the_auto_choices():
    """An element of mass 0 (``element_weight``), or a pool row of ``sample_weight`` 0, is a
    removed element in the map's ``"auto"`` choice too, as in its moments and k-means: the fit
    chooses as without them (a mass-0 element that encoded the label had taken a bandwidth 4
    times wider; weight-0 pool rows the same)."""
    rng = np.random.default_rng(0)
    n = 40
    y = np.arange(n) % 2
    sets = [np.r_[[[100.0 * (2 * y[i] - 1) + rng.normal(), 0.0]], rng.normal(size=(15, 2))]
            for i in range(n)]
    ew = [np.r_[0.0, np.ones(15)] for _ in range(n)]
    a = NystromFeatures(8, random_state=0).fit(sets, y, element_weight=ew)
    b = NystromFeatures(8, random_state=0).fit([s[1:] for s in sets], y)
    assert a.selection_scores_ == b.selection_scores_
    assert a.bandwidth_ == pytest.approx(b.bandwidth_) and a.relative_bandwidth_ == b.relative_bandwidth_
    rng = np.random.default_rng(2)
    X, yp = rng.normal(size=(150, 2)), np.arange(150) % 2
    far = np.c_[10.0 * yp + 0.3 * rng.normal(size=150), 0.3 * rng.normal(size=150)]
    a = NystromFeatures(8, random_state=0).fit(np.r_[X, far], np.r_[yp, yp],
                                               sample_weight=np.r_[np.ones(150), np.zeros(150)])
    b = NystromFeatures(8, random_state=0).fit(X, yp)
    assert a.selection_scores_ == b.selection_scores_
    assert a.relative_bandwidth_ == b.relative_bandwidth_


def test_weights_whose_counts_overflow_are_refused_by_name():
    """Finite weights of 1e308 over 40 elements: the fitted counts (weights times elements)
    would be infinite (then a later ``partial_fit`` failed inside torch's eigh): a ValueError
    that says to divide them; weights of 1e300 fit as the weights themselves."""
    from skset import OTKEmbedding

    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(10, 2)) for _ in range(4)]
    for est in (NystromFeatures(4, random_state=0), OTKEmbedding(n_supports=2, random_state=0)):
        with pytest.raises(ValueError, match="overflow the fitted counts"):
            est.fit(sets, sample_weight=np.full(4, 1e308))
        est.fit(sets, sample_weight=np.full(4, 1e300))
        assert np.isfinite(est.counts_).all()


def test_standardize_is_not_chosen_on_float32_rounding():
    """On one feature, standardised or not is one map: in float32 the two scores differ by
    rounding alone (2e-6 of the error at a scale of 7, where ``standardize_`` had followed the
    data's scale); both dtypes keep the default at every scale."""
    rng = np.random.RandomState(0)
    y = np.arange(30) % 2
    sets = [rng.randn(20, 1) * (1 + 0.3 * c) + 0.2 * c for c in y]
    for dtype in ("float32", "float64"):
        for scale in (1e-3, 1.0, 7.0, 1e3):
            nf = NystromFeatures(16, window=1, normalize=False, bandwidth=0.5, random_state=0,
                                 dtype=dtype).fit([s * scale for s in sets], y)
            assert nf.standardize_, (dtype, scale)


def test_transform_exact_on_heavy_tailed_data_in_float32():
    """Elements far from zero against the bandwidth (lognormal data, sigma 3: bandwidth 0.003,
    elements at 40 standard units) get their kernel from the differences: the expansion of
    ||x - w||^2 cancelled to an error of order 1 in the exponent, and an element on an anchor
    read 0 for 1 (float32, the default). The exact map: scikit-learn's rbf_kernel in float64."""
    from sklearn.metrics.pairwise import rbf_kernel

    rng = np.random.default_rng(0)
    X = [rng.lognormal(0.0, 3.0, size=(int(n), 1)) for n in rng.integers(50, 200, 30)]
    f = NystromFeatures(random_state=0).fit(X)
    Z = np.concatenate(f.transform(X))
    E = (np.concatenate(X) - f.mean_.astype(float)) / f.scale_.astype(float)
    exact = rbf_kernel(E, f.anchors_.astype(float), gamma=1 / (2 * f.bandwidth_**2)) \
        @ f.normalization_.astype(float)
    assert np.abs(E).max() / f.bandwidth_ > 1e4  # far from zero against the bandwidth
    np.testing.assert_allclose(Z, exact, atol=2e-3)


def test_the_supervised_models_fit_under_pandas_output_and_frame_their_transform():
    # OTKClassifier's start rule read its inner embedding's transform, a frame under
    # transform_output="pandas" (a ValueError); the networks had transform and feature names but
    # no set_output, so a pipeline holding one could not be set to pandas
    import sklearn
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    from skset import DeepSetsClassifier, OTKClassifier, SetTransformerRegressor

    rng = np.random.default_rng(3)
    X = [rng.normal(size=(int(rng.integers(5, 15)), 3)) for _ in range(24)]
    y = np.array([int(x[:, 0].mean() > 0) for x in X])
    otk = dict(n_components=4, n_supports=2, max_iter=2, random_state=0)
    plain = OTKClassifier(**otk).fit(X, y)
    with sklearn.config_context(transform_output="pandas"):
        framed = OTKClassifier(**otk).fit(X, y)
        out = framed.transform(X)
    assert list(out.columns) == list(framed.get_feature_names_out())
    np.testing.assert_array_equal(out.to_numpy(), plain.transform(X))
    for est in (OTKClassifier(**otk), DeepSetsClassifier(hidden_size=8, max_iter=2, random_state=0)):
        pipe = Pipeline([("sets", est), ("clf", LogisticRegression())]).set_output(transform="pandas")
        assert list(pipe.fit(X, y)[:-1].transform(X).columns) == list(pipe[0].get_feature_names_out())
    reg = SetTransformerRegressor(hidden_size=8, n_heads=2, max_iter=1, random_state=0)
    reg.set_output(transform="pandas").fit(X, y.astype(float))
    assert reg.transform(X).shape[0] == 24 and isinstance(reg.predict(X), np.ndarray)
