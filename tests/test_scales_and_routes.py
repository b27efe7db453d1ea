"""Tiny feature scales, non-finite real elements in the engine, element masses through a k-mer
pipeline, and ``predict_log_proba``. Each test failed before its fix."""

import warnings

import numpy as np
import pytest
import sklearn
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline

from skset import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    NystromFeatures,
    OTKClassifier,
    OTKEmbedding,
    SetTransformerClassifier,
    SetTransformerRegressor,
)
from skset.nn import otk_embed, otk_plans
from skset.ot import sinkhorn


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _sets(n=12, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    return [scale * rng.normal(size=(int(rng.integers(4, 8)), 3)) for _ in range(n)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normalized_otk_rows_have_their_norm_at_any_scale(dtype):
    """Rows of features near 1e-14 to 1e-25 are rescaled to norm sqrt(D) like any others (an
    absolute clamp of 1e-12 had shrunk them: norms 0.012-0.024 for 3; then one of 1e-18 x
    sqrt(D): 0.86 at 1e-17, 0.0009 at 1e-20, 0 at 1e-25)."""
    for scale in (1.0, 1e-14, 1e-17, 1e-20, 1e-25):
        Z = OTKEmbedding(n_supports=3, dtype=dtype, random_state=0).fit_transform(_sets(scale=scale))
        np.testing.assert_allclose(np.linalg.norm(Z, axis=1), np.sqrt(Z.shape[1]), rtol=1e-4)


@pytest.mark.parametrize("cls", [SetTransformerRegressor, DeepSetsRegressor])
def test_networks_standardise_tiny_features(cls):
    """Features near 1e-13 are standardised as ``NystromFeatures`` does (an absolute floor had
    left them as they were: the network saw constant inputs)."""
    X = _sets(scale=1e-13)
    y = np.array([s[:, 0].mean() for s in X]) * 1e13
    est = cls(max_iter=1, window=1, random_state=0, device="cpu").fit(X, y)
    nf = NystromFeatures(4, window=1, random_state=0).fit(X)
    np.testing.assert_allclose(est.scale_, nf.scale_, rtol=1e-5)
    assert np.ptp(est.predict(X)) > 1e-4


def test_non_finite_real_elements_are_named_by_the_engine():
    """A real element of NaN or infinity (``sinkhorn``'s similarity, ``otk_embed``'s ``x``) is
    named, not a silent NaN plan; -inf similarities (forbidden pairs) and padding stay allowed."""
    K = torch.randn(3, 4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[2, 3] = False
    K[2, 3, 0] = float("nan")  # padding: anything
    K[1, 0, 1] = -float("inf")
    assert torch.isfinite(sinkhorn(K, mask, epsilon=0.5, n_iter=20)[:, :3]).all()
    for bad in (float("inf"), float("nan")):
        K2 = K.clone()
        K2[0, 1, 2] = bad
        for method in ("auto", "log", "exp"):
            with pytest.raises(ValueError, match="similarity of set 0 of the batch holds NaN"):
                sinkhorn(K2, mask, epsilon=0.5, n_iter=20, method=method)
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    x[1, 2, 0] = float("inf")
    refs = torch.randn(1, 2, 3, dtype=torch.float64)
    for fn in (otk_embed, otk_plans):
        with pytest.raises(ValueError, match="x of set 1 of the batch holds NaN or infinity"):
            fn(x, None, refs, epsilon=0.5)
    assert torch.isfinite(otk_embed(x, torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]), refs,
                                    epsilon=0.5)).all()


def test_element_masses_reach_the_embedding_of_a_kmer_pipeline():
    """The README's pipeline with element masses routed to ``OTKEmbedding`` while
    ``NystromFeatures`` reads k-mers: each k-mer weighs the mean of its elements' masses (the
    masses of ``n_i`` elements were refused for sets of ``n_i - window + 1`` k-mers)."""
    rng = np.random.default_rng(0)
    X = [np.cumsum(rng.normal(size=(10, 1)), 0) * (1 if i % 2 else -1) for i in range(30)]
    y = np.arange(30) % 2
    masses = [rng.uniform(0.5, 1.5, size=10) for _ in X]
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = Pipeline([
            ("nys", NystromFeatures(8, window=3, random_state=0).set_fit_request(element_weight=False)),
            ("otk", OTKEmbedding(n_supports=3, random_state=0)
             .set_fit_request(element_weight=True).set_transform_request(element_weight=True)),
            ("clf", LogisticRegression())]).fit(X, y, element_weight=masses)
        proba = pipe.predict_proba(X, element_weight=masses)
    feats = pipe[0].transform(X)
    kmer = [np.convolve(m, np.ones(3) / 3, mode="valid") for m in masses]
    direct = pipe[1].transform(feats, element_weight=kmer)
    np.testing.assert_allclose(pipe[2].predict_proba(direct), proba, atol=1e-10)
    assert not np.allclose(pipe[1].transform(feats), direct)


@pytest.mark.parametrize("cls", [OTKClassifier, DeepSetsClassifier, SetTransformerClassifier])
def test_predict_log_proba_is_the_log_of_predict_proba(cls):
    X, y = _sets(20), np.arange(20) % 2
    kw = {"n_components": 4, "n_supports": 2} if cls is OTKClassifier else {"hidden_size": 4}
    est = cls(**kw, max_iter=1, random_state=0, device="cpu").fit(X, y)
    np.testing.assert_allclose(est.predict_log_proba(X), np.log(est.predict_proba(X)))


def test_labels_classes_and_masses_given_as_tensors_are_read_on_the_host():
    """Tensors on a GPU (emulated: a tensor whose numpy conversion raises as a CUDA one's does,
    until ``.cpu()``) as instance labels of ``ABCClusterer``'s checks, as ``classes=``, and as element
    masses after a k-mer map are moved to the host first (numpy's conversion raised, or the
    masses were left unspanned)."""
    from skset._weighting import spanned_masses
    from skset.cluster._abc_data import check_instance_labels, check_pool_labels
    from skset.neural_network._targets import encode_class_targets

    def on_device(a):  # a tensor whose numpy conversion goes through .cpu() only
        t = torch.as_tensor(np.asarray(a))

        class Remote(torch.Tensor):
            def __array__(self, *args, **kwargs):
                raise TypeError("can't convert cuda:0 device type tensor to numpy")

            def numpy(self, *args, **kwargs):
                raise TypeError("can't convert cuda:0 device type tensor to numpy")

            def cpu(self, *args, **kwargs):  # the copy to the host: a plain tensor
                return self.as_subclass(torch.Tensor)

        return t.as_subclass(Remote)

    sets = [np.zeros((3, 2)), np.zeros((4, 2))]
    out = check_instance_labels([on_device([0, 1, 1]), on_device([1, 1, 0, 0])], sets)
    assert [o.tolist() for o in out] == [[0, 1, 1], [1, 1, 0, 0]]
    assert check_pool_labels(on_device([0, 1, 0, 2]), 4)[1].tolist() == [0, 1, 0, 2]
    enc = encode_class_targets(np.array([0, 1, 1]), 3, True, on_device([0, 1, 2]), name="C")
    assert enc.fitted["classes_"].tolist() == [0, 1, 2]
    spanned = spanned_masses([on_device(np.ones(6)), on_device(np.ones(5))],
                             [np.zeros((4, 1)), np.zeros((3, 1))])
    assert [len(m) for m in spanned] == [4, 3]


def test_spanned_masses_of_sets_of_one_kmer_and_a_zero_rows_gradient():
    """Sets no longer than the span (one k-mer each, the whole batch) take the mean of their
    masses (they were refused when no set of the batch was longer); a centred row of zeros
    trained without a floor keeps a gradient Adam can square in float32 (1e37 had frozen the
    parameter)."""
    from skset._weighting import spanned_masses
    from skset.nn.otk import normalize_rows

    out = spanned_masses([np.array([1.0, 2.0, 3.0]), np.array([4.0, 6.0])],
                         [np.zeros((1, 2)), np.zeros((1, 2))])
    assert [m.tolist() for m in out] == [[2.0], [5.0]]
    w = torch.nn.Parameter(torch.ones(3))
    z = (w - torch.ones(3)).unsqueeze(0)  # a row exactly at the centre
    normalize_rows(z).sum().backward()
    assert torch.isfinite(w.grad.square()).all()


@pytest.mark.parametrize("multilabel", [False, True])
def test_predict_log_proba_stays_finite_where_a_probability_rounds_to_zero(multilabel):
    """Logits of thousands: ``predict_proba`` rounds to exactly 0 and 1, its log was -inf; the
    log-softmax (log-sigmoid per label) of the float64 logits is finite."""
    rng = np.random.default_rng(13)
    X = [rng.normal(size=(int(rng.integers(2, 8)), 2)) + (10 if i % 2 else -10) for i in range(20)]
    y = np.arange(20) % 2
    y = np.c_[y, 1 - y] if multilabel else y
    clf = DeepSetsClassifier(max_iter=300, random_state=0, device="cpu").fit(X, y)
    far = [x * 1000 for x in X[:4]]
    logits = torch.as_tensor(clf.decision_function(far), dtype=torch.float64)
    got = clf.predict_log_proba(far)
    assert np.isfinite(got).all() and (clf.predict_proba(far) == 0).any()
    if multilabel:
        want = torch.nn.functional.logsigmoid(logits)
    else:
        want = torch.log_softmax(torch.stack([torch.zeros_like(logits), logits], 1), 1)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6 * float(logits.abs().max()))


@pytest.mark.parametrize("scale", [1e-25, 1e20])
def test_the_sphere_reads_float32_rows_of_any_scale(scale):
    """Unstandardised elements on the sphere (``normalize=True``) at 1e-25 in float32: their
    squares underflowed in the norm (every element one feature row); scaled by their largest
    magnitude first, the map is the one of the same data at scale 1. The projection itself at
    1e-25 and at 1e20 (rows of zeros before; the estimators refuse float32 values past 1e15,
    the engine modules take them)."""
    from skset.nn.nystrom import _unit

    X = [s.astype(np.float32) for s in _sets(10)]
    kw = dict(n_components=8, standardize=False, normalize=True, keep_norm=False, window=1,
              random_state=0)
    if scale < 1:
        ref = NystromFeatures(**kw).fit(X).transform(X)
        got = NystromFeatures(**kw).fit([x * np.float32(scale) for x in X]).transform(
            [x * np.float32(scale) for x in X])
        np.testing.assert_allclose(np.vstack(got), np.vstack(ref), atol=1e-5)
    u, n = _unit(torch.tensor([[3.0, 4.0]]) * scale)
    np.testing.assert_allclose(u.numpy(), [[0.6, 0.8]], rtol=1e-6)
    np.testing.assert_allclose(n.item(), 5.0 * scale, rtol=1e-6)


def test_the_map_rule_chooses_alike_at_any_offset_and_scale():
    """The element map's rule scores its unstandardised Gaussian candidate on rows centred in
    float64, as the fit reads features far from zero (in float32 an offset of 1e3 had made it
    take the standardised map at another bandwidth), and its moments and median distance in
    units of a power of two (data times 1e-200 in float64 had kept single elements)."""
    rng = np.random.default_rng(0)
    y = np.arange(120) % 2
    X = [np.hstack([rng.normal(size=(30, 1)) * 3 + 1.5 * c, rng.normal(size=(30, 8)) * 0.01])
         for c in y]
    kw = dict(n_components=32, window=1, normalize=False, random_state=0)
    ref = NystromFeatures(**kw, dtype="float64").fit(X, y)
    far = NystromFeatures(**kw).fit([x + 1e3 for x in X], y)
    assert (far.standardize_, far.relative_bandwidth_) == (ref.standardize_, ref.relative_bandwidth_)
    rng = np.random.default_rng(21)
    X, y = [], np.arange(40) % 2
    for c in y:
        s = 0.3 * rng.normal(size=(int(rng.integers(25, 40)), 1))
        s[5:10, 0] += np.linspace(0, 2, 5) if c else np.linspace(2, 0, 5)
        X.append(s)
    fits = [NystromFeatures(n_components=8, dtype="float64", random_state=0).fit(
        [x * scale for x in X], y) for scale in (1.0, 1e-200)]
    assert len({(f.window_, f.dilation_, f.standardize_, f.normalize_, f.relative_bandwidth_)
                for f in fits}) == 1
    assert fits[0].window_ > 1


def test_a_float64_fit_out_of_range_is_not_told_to_use_float64():
    X = [s * 1e-200 for s in _sets(12)]
    with pytest.raises(ValueError, match="out of the range of float64") as err:
        NystromFeatures(4, window=1, standardize=False, normalize=False, dtype="float64").fit(X)
    assert "dtype='float64'" not in str(err.value)


def test_row_norm_at_every_scale_and_its_gradient():
    """Rows from 1e-30 to 1e30 (and zero rows) in float32 and float64: the norms of a float64
    reference (the plain float32 norm is 0 or inf at both ends); the rescued rows' gradient is
    the row over its norm, as the plain one's."""
    from skset.nn.norm import row_norm

    rng = np.random.default_rng(0)
    rows = rng.normal(size=(13, 5)) * (10.0 ** np.arange(-30, 31, 5))[:, None]
    rows = np.vstack([rows, np.zeros((1, 5))])
    want = np.array([np.sqrt(((r / max(np.abs(r).max(), 1e-300)) ** 2).sum())
                     * max(np.abs(r).max(), 0.0) for r in rows])
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor(rows, dtype=dtype)
        np.testing.assert_allclose(row_norm(x).squeeze(-1).double().numpy(), want, rtol=1e-6)
        assert row_norm(x[None]).shape == (1, 14, 1)
    x = torch.tensor(rows[:-1], dtype=torch.float64, requires_grad=True)
    row_norm(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), rows[:-1] / want[:-1, None], rtol=1e-12)


def test_normalised_rows_with_a_subnormal_norm_stay_finite():
    """A float32 row of norm 1e-45 above its floor: norm / sqrt(D) rounded to 0 and the row
    became inf / NaN; divided by its norm first, it has norm sqrt(D)."""
    from skset.nn.otk import normalize_rows

    z = torch.zeros(2, 6)
    z[0, 0] = 1e-45
    z[1] = torch.arange(6.0)
    out = normalize_rows(z, torch.zeros(2))
    assert torch.isfinite(out).all()
    np.testing.assert_allclose(torch.linalg.vector_norm(out, dim=1).numpy(), [6 ** 0.5] * 2, rtol=1e-6)
