"""Bad (and extreme but valid) input to the engine: ``skset.ot``, ``skset.nn``, the exported graphs
and the OTK embedding's normalisation (issue 27).

The rule: bad input raises a clear ``ValueError`` / ``TypeError`` naming the set and the problem;
valid input gets a right answer; never a silent NaN; inputs are never modified in place. One test
(or parametrized test) per defect of the issue (1, 6, 7, 12, 13), named after its number, and one
for the borderline case that was decided (exported graph at small epsilon). Each defect's test
failed before its fix (44 of the 56 cases first written).
"""

import math
import warnings

import numpy as np
import pytest
import torch

import skset
from skset import export as sx
from skset.nn import ABCKernel, OTKLayer
from skset.ot import sinkhorn

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

GARBAGE = [math.nan, 1e30, -math.inf]


def _sets(seed=0, n_sets=8, d=3, low=2, high=9):
    rng = np.random.default_rng(seed)
    return [rng.normal(1.0, 2.0, size=(int(n), d)) for n in rng.integers(low, high, n_sets)]


# ------------------------------------------------------------------------------------- defect 1
def _exported_otk(kind):
    X = _sets()
    if kind == "otk_emb":
        est = skset.OTKEmbedding(n_supports=3, sinkhorn_iter=30, sinkhorn_tol=None,
                                 random_state=0, device="cpu").fit(X)
    else:  # Nystrom features (a Gaussian kernel: squared distances) and positions
        y = np.arange(len(X)) % 2
        est = skset.OTKClassifier(n_components=5, n_supports=3, position_sigma=0.5, max_iter=1,
                                  random_state=0, device="cpu").fit(X, y)
    return est, _sets(seed=1, n_sets=5)


@pytest.fixture(scope="module")
def exported_otk():
    return {kind: _exported_otk(kind) for kind in ("otk_emb", "otk_clf")}


@pytest.mark.parametrize("fill", GARBAGE)
@pytest.mark.parametrize("kind", ["otk_emb", "otk_clf"])
@pytest.mark.parametrize("how", ["program", "onnx"])
def test_defect_1_exported_graph_padding_holds_anything(exported_otk, kind, how, fill, tmp_path):
    """Defect 1: the exported OTK graphs (torch.export program, ONNX via the default exporter)
    give the same outputs whatever the padding of the batch holds (NaN, 1e30, -inf), as the
    docs say; they returned NaN for every set of the batch."""
    est, X_new = exported_otk[kind]
    x, mask = sx.pad_sets(X_new, n_max=12)
    bad = x.copy()
    bad[~mask] = fill
    bad_before = bad.copy()
    if how == "program":
        run = sx.export_program(est).module()
        clean = [t.numpy() for t in run(torch.from_numpy(x), torch.from_numpy(mask))]
        got = [t.numpy() for t in run(torch.from_numpy(bad), torch.from_numpy(mask))]
    else:
        import onnxruntime as ort

        path = sx.export_onnx(est, tmp_path / "m.onnx")
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        clean = session.run(None, {"x": x, "mask": mask})
        got = session.run(None, {"x": bad, "mask": mask})
    np.testing.assert_array_equal(bad, bad_before)  # not modified in place
    for g, c in zip(got, clean, strict=True):
        assert np.all(np.isfinite(g)) if g.dtype.kind == "f" else True
        np.testing.assert_allclose(g, c, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------- defect 6
def _degenerate_sets():
    """Sets of two distinct elements each, more supports than that: the references repeat
    elements (with a tiny jitter)."""
    a, b, c = np.array([1.0, 2.0]), np.array([-1.0, 0.5]), np.array([3.0, -2.0])
    return [np.stack([a, b, a, b, a]), np.stack([c, a, c, c])]


@pytest.mark.parametrize("case", ["one_set", "one_set_float64", "one_set_wasserstein",
                                  "degenerate_one_set", "degenerate_two_references"])
def test_defect_6_embedding_permutation_invariance(case):
    """Defect 6: OTKEmbedding (centre then normalise to norm sqrt(D)) is permutation invariant
    within a set for a fit on one set and for degenerate (repeated) references. A fit on one set
    centres its embedding to rounding noise, which the normalisation scaled up to norm sqrt(D):
    a permuted copy of the training set came out O(1) away from the set itself (exactly 0)."""
    kw = dict(n_supports=3, random_state=0, device="cpu")
    X = _sets(n_sets=1, low=7, high=8)
    if case == "one_set_float64":
        kw["dtype"] = "float64"
    elif case == "one_set_wasserstein":
        kw["fit_method"] = "wasserstein"
    elif case.startswith("degenerate"):
        X = _degenerate_sets()[:1] if case == "degenerate_one_set" else _degenerate_sets()
        kw.update(n_supports=4, n_references=1 if case == "degenerate_one_set" else 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # fewer distinct elements than supports
        est = skset.OTKEmbedding(**kw).fit(X)
    rng = np.random.default_rng(3)
    ref = est.transform(X)
    D = ref.shape[1]
    for _ in range(4):
        perm = [s[rng.permutation(len(s))] for s in X]
        np.testing.assert_allclose(est.transform(perm), ref, rtol=1e-4,
                                   atol=1e-4 * math.sqrt(D))
    if len(X) == 1:  # the training set is the mean embedding: it centres to 0
        np.testing.assert_array_equal(ref, 0.0)
        # and so does the exported graph, which normalises as transform does
        module = sx.serving_module(est, sinkhorn_iter=300)
        perm = [X[0][rng.permutation(len(X[0]))], X[0]]
        x, mask = sx.pad_sets(perm, dtype=ref.dtype)
        with torch.no_grad():
            out = module(torch.from_numpy(x), torch.from_numpy(mask))[0].numpy()
        np.testing.assert_allclose(out, 0.0, atol=1e-4 * math.sqrt(D))


# ------------------------------------------------------------------------------------- defect 7
@pytest.mark.parametrize("mode", ["kernel", "plan", "similarity"])
@pytest.mark.parametrize("sigma", [1e300, 1e-300])
def test_defect_7_position_sigma_extremes(sigma, mode):
    """Defect 7: an extreme ``position_sigma`` is computed safely: 1e300 (OverflowError deep in
    the OT module) means no positional weighting (the embedding without positions); 1e-300 (a
    misleading float32 "inputs too large" error) is the limit of a tiny bandwidth, the embedding
    at sigma=1e-6. The layer takes inf too (no weighting); the estimator's check of
    ``position_sigma`` (a positive finite number) names it."""
    X = _sets()
    kw = dict(n_supports=3, position_mode=mode, random_state=0, device="cpu", sinkhorn_tol=None,
              sinkhorn_iter=200)
    got = skset.OTKEmbedding(position_sigma=sigma, **kw).fit(X).transform(X)
    assert np.all(np.isfinite(got))
    limit = None if sigma > 1 else 1e-6
    want = skset.OTKEmbedding(position_sigma=limit, **kw).fit(X).transform(X)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the engine, in float32 and float64 alike
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(3, 6, 2, dtype=dtype, generator=torch.Generator().manual_seed(0))
        mask = torch.arange(6) < torch.tensor([[6], [4], [1]])
        for s in (sigma, math.inf):
            layer = OTKLayer(2, 3, position_sigma=s, position_mode=mode).to(dtype)
            assert torch.isfinite(layer(x, mask)).all()
        layer.position_sigma = None
        if sigma > 1:  # inf: no positional weighting
            torch.testing.assert_close(layer(x, mask), OTKLayer(
                2, 3, position_sigma=math.inf, position_mode=mode, references=layer.references
                .detach()).to(dtype)(x, mask))
    with pytest.raises(ValueError, match="position_sigma"):
        skset.OTKEmbedding(position_sigma=math.inf, **kw).fit(X)


# ------------------------------------------------------------------------------------ defect 12
@pytest.mark.parametrize("method", ["auto", "log", "exp"])
def test_defect_12_sinkhorn_bad_input(method):
    """Defect 12: ``skset.ot.sinkhorn`` on bad input. A set with no real element (a mask row all
    False) raises a ValueError naming its batch index (was a NaN plan); numpy arrays are
    converted (was AttributeError); integer similarities are converted to the default float
    dtype (was a torch RuntimeError); ``n_iter`` must be a positive integer (-3 was accepted)."""
    g = torch.Generator().manual_seed(0)
    K = torch.randn(3, 4, 2, generator=g)
    mask = torch.tensor([[True] * 4, [True, True, False, False], [False] * 4])
    with pytest.raises(ValueError, match=r"set 2 .*no real element"):
        sinkhorn(K, mask, epsilon=0.5, method=method)
    ref = sinkhorn(K[:2], mask[:2], epsilon=0.5, method=method)
    got = sinkhorn(K[:2].numpy(), mask[:2].numpy(), epsilon=0.5, method=method)
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, ref)
    Ki = torch.randint(-3, 4, (2, 4, 2), generator=g)
    Ki_before = Ki.clone()
    got = sinkhorn(Ki, epsilon=0.5, method=method)
    assert got.dtype == torch.get_default_dtype()
    torch.testing.assert_close(got, sinkhorn(Ki.to(torch.get_default_dtype()), epsilon=0.5,
                                             method=method))
    assert torch.equal(Ki, Ki_before)
    for n_iter in (-3, 0, 2.5, True):
        with pytest.raises(ValueError, match="n_iter"):
            sinkhorn(K, epsilon=0.5, n_iter=n_iter, method=method)
    with pytest.raises(TypeError, match="similarity"):
        sinkhorn(K.to(torch.complex64), epsilon=0.5, method=method)
    with pytest.raises(TypeError, match="similarity"):
        sinkhorn("not a tensor", epsilon=0.5, method=method)
    # through the OTK layer: the set of x is named, not its copy for one of several references
    layer = OTKLayer(2, 3, n_references=2, method=method)
    with pytest.raises(ValueError, match=r"set 2 .*no real element"):
        layer(torch.randn(3, 4, 2, generator=g), mask)


# ------------------------------------------------------------------------------------ defect 13
def _padded_batch(dtype=torch.float32):
    x = torch.randn(3, 7, 4, dtype=dtype, generator=torch.Generator().manual_seed(0))
    mask = torch.arange(7) < torch.tensor([[7], [4], [2]])
    return x.masked_fill(~mask.unsqueeze(-1), 0.0), mask


@pytest.mark.parametrize("fill", GARBAGE)
@pytest.mark.parametrize("module", [
    "otk", "otk_positions", "otk_weights", "otk_unbalanced",
    "abc", "abc_additive", "abc_rbf", "abc_cosine", "abc_knn"])
def test_defect_13_nn_padding_holds_anything(module, fill):
    """Defect 13: ``skset.nn.OTKLayer`` and ``ABCKernel``: NaN (or 1e30, -inf) in the padding of
    a padded batch (where the mask is False) leaked into the outputs of the real sets. Outputs on
    real elements (and gradients of the parameters) equal those of zero padding, and the input is
    left untouched."""
    torch.manual_seed(0)
    x, mask = _padded_batch()
    weights = None
    if module.startswith("otk"):
        kw = {"otk_positions": dict(position_sigma=0.5), "otk_unbalanced": dict(reg_m=1.0)}
        net = OTKLayer(4, 3, 2, **kw.get(module, {}))
        if module == "otk_weights":
            weights = torch.rand(3, 7, generator=torch.Generator().manual_seed(1)) + 0.1

        def real(out):  # (B, q * p, k): every row is pooled from real elements
            return out
    else:
        sim = {"abc_rbf": "rbf", "abc_cosine": "cosine", "abc_knn": "knn"}.get(module)
        net = ABCKernel(4, dim=8, n_layers=2, n_heads=2, input_similarity=sim,
                        n_neighbors=2, compatibility="additive" if module == "abc_additive"
                        else "multiplicative")
        if sim is not None:
            net.mix.copy_(torch.tensor([0.5, 0.5]))  # the prior and the learned part

        def real(out):  # (B, n, n): the real pairs
            return out[mask[:, :, None] & mask[:, None, :]]

    bad = x.masked_fill(~mask.unsqueeze(-1), fill)
    bad_before = bad.clone()
    args = (mask,) if weights is None else (mask, weights)
    clean = net(x, *args)
    ref_grads = torch.autograd.grad(real(clean).sum(), list(net.parameters()),
                                    allow_unused=True)
    got = net(bad, *args)
    assert torch.equal(bad.isnan(), bad_before.isnan())
    assert torch.equal(bad.nan_to_num(), bad_before.nan_to_num())
    assert torch.isfinite(real(got)).all()
    torch.testing.assert_close(real(got), real(clean))
    grads = torch.autograd.grad(real(got).sum(), list(net.parameters()), allow_unused=True)
    for g, r in zip(grads, ref_grads, strict=True):
        if r is not None:
            assert torch.isfinite(g).all()
            torch.testing.assert_close(g, r)


# ------------------------------------------------------------------------------------ borderline
@pytest.mark.parametrize("dtype, rtol", [("float32", 2e-3), ("float64", 1e-11)])
def test_borderline_export_small_epsilon_rounding(dtype, rtol):
    """Borderline (decided, documented in ``skset.export``): at ``epsilon=1e-3`` the exported
    graph (log-domain Sinkhorn for every set) differs from the estimator (exp domain, log where it
    must) by float32 rounding of ``K / epsilon``, up to about 1e-3 relative (4.2e-4 measured);
    accepted. In float64 the two agree to 1e-11; the outputs are finite either way."""
    X = _sets(n_sets=12)
    y = np.arange(len(X)) % 2
    est = skset.OTKClassifier(n_components=5, n_supports=3, position_sigma=0.5, epsilon=1e-3,
                              max_iter=1, random_state=0, device="cpu", dtype=dtype).fit(X, y)
    X_new = _sets(seed=1, n_sets=6)
    x, mask = sx.pad_sets(X_new, dtype=np.float64 if dtype == "float64" else np.float32)
    with torch.no_grad():
        out = sx.serving_module(est)(torch.from_numpy(x), torch.from_numpy(mask))
    for got, ref in ((out[0], est.decision_function(X_new)), (out[-1], est.transform(X_new))):
        got = got.numpy()
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, ref, rtol=0, atol=rtol * np.abs(ref).max())


def test_values_too_large_are_named_without_a_numpy_warning():
    from skset._sets import check_sets

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered in dot" came first
        with pytest.raises(ValueError, match="too large for float32"):
            check_sets([np.full((20, 1), 1e200)], compute_dtype="float32")


def test_public_helpers_name_bad_arguments(tmp_path):
    """Public helpers outside the estimators: bad arguments are named (raw torch, numpy or OS
    errors, silent truncation or a count of 0 before)."""
    from skset.datasets import make_motif_order, read_ts
    from skset.nn import batched_kmeans, eigengap_n_clusters, spectral_cluster
    from skset.utils import limit_threads, set_worker_threads

    with pytest.raises(ValueError, match="X: set 0 is empty"):
        sx.pad_sets([np.zeros((0, 2))])
    with pytest.raises(ValueError, match="contains NaN"):
        sx.pad_sets([np.array([[np.nan, 1.0]])])
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        sx.pad_sets([np.ones((2, 2))], dtype=np.float16)
    with pytest.raises(ValueError, match="n_max must be an integer"):
        sx.pad_sets([np.ones((2, 2))], n_max=7.9)
    # 11 motifs: 40 million orders, drawn without listing them (memory ran out)
    X, y = make_motif_order(3, n_motifs=11, motif_length=1, alphabet_size=12, min_length=11,
                            max_length=12, random_state=0)
    assert len(X) == 3 and y.max() < math.factorial(11)
    with pytest.raises(ValueError, match="n_motifs must be at most 20"):
        make_motif_order(3, n_motifs=21, motif_length=1, alphabet_size=30, min_length=21)
    with pytest.raises(TypeError, match="path must be a str"):
        read_ts(0)  # a file descriptor: it was read, then closed
    (tmp_path / "bad.ts").write_bytes(b"@data\n\xff\xfe1,2:a\n")
    with pytest.raises(ValueError, match="bad.ts: not a text file in UTF-8"):
        read_ts(tmp_path / "bad.ts")
    est = skset.OTKEmbedding(n_supports=2, random_state=0).fit([np.ones((3, 2)), np.eye(2)])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        skset.save(est, tmp_path / "missing" / "m.skset")
    with pytest.raises(IsADirectoryError):
        skset.save(est, tmp_path)
    with pytest.raises(TypeError, match="binary file object"):
        skset.save(est, None)
    for call in (lambda: limit_threads(2**31).__enter__(), lambda: set_worker_threads(2**31)):
        with pytest.raises(ValueError, match="at most 65536"):
            call()
    w = torch.tensor([[0.0, 0.1, 0.9, 1.0]])
    with pytest.raises(ValueError, match="max_clusters must be an integer >= 1"):
        eigengap_n_clusters(w, torch.tensor([4]), max_clusters=0)
    with pytest.raises(ValueError, match="eigenvalues hold NaN"):
        eigengap_n_clusters(torch.full((1, 4), float("nan")), torch.tensor([4]))
    A = torch.ones(1, 4, 4)
    with pytest.raises(ValueError, match="n_init must be an integer >= 1"):
        spectral_cluster(A, n_init=0)
    with pytest.raises(ValueError, match="n_clusters must lie in"):
        batched_kmeans(torch.randn(1, 3, 2), None, torch.tensor([5]))
    with pytest.raises(TypeError, match="n_clusters must be an int tensor"):
        batched_kmeans(torch.randn(1, 3, 2), None, 2)
    from skset.datasets import make_circles_instances, make_unique_count
    from skset.nn import kmer_level_shape, kmer_unfold

    for kw, what in ((dict(test_fraction="0.5"), "test_fraction"),
                     (dict(test_fraction=0.001), "every digit"),
                     (dict(split_random_state=-1), "split_random_state")):
        with pytest.raises(ValueError, match=what):
            make_unique_count(3, random_state=0, **kw)
    with pytest.raises(ValueError, match=r"\(low, high\) pair"):
        make_circles_instances(2, n_circles=[3])
    for kw in (dict(window=0), dict(window=2.5), dict(window=2, dilation=-1)):
        with pytest.raises(ValueError, match="must be a positive integer"):
            kmer_unfold(torch.randn(1, 5, 2), None, **kw)
    with pytest.raises(ValueError, match="window must be a positive integer"):
        kmer_level_shape(torch.randn(1, 4, 6), 0)


def test_engine_functions_name_bad_arguments():
    """The engine's public functions: references that do not fit ``x``, a negative
    ``position_sigma``, a string ``epsilon``, a zero bandwidth, bad class weights of the ABC
    loss are named (torch's matmul errors, a comparison error, a ZeroDivisionError before)."""
    from skset.nn import abc_loss, gaussian_kernel, otk_embed, otk_plans

    x = torch.randn(2, 3, 4)
    for bad in (torch.randn(2, 4), torch.randn(1, 2, 5), torch.randn(1, 2, 4).double(),
                torch.randn(1, 0, 4)):
        for fn in (otk_embed, otk_plans):
            with pytest.raises(ValueError, match="references"):
                fn(x, None, bad, epsilon=0.5)
    with pytest.raises(ValueError, match="position_sigma must be None or a positive"):
        otk_embed(x, None, torch.randn(1, 2, 4), epsilon=0.5, position_sigma=-1.0)
    with pytest.raises(ValueError, match="epsilon must be a positive finite number"):
        sinkhorn(torch.randn(1, 3, 2), epsilon="0.5")
    with pytest.raises(ValueError, match="bandwidth must be a positive finite number"):
        gaussian_kernel(torch.randn(3, 2), torch.randn(2, 2), 0.0)
    logits = torch.randn(1, 3, 3)
    labels = torch.tensor([[0, 0, 1]])
    for bad in ("foo", (float("nan"), 1.0), (-1.0, 1.0), (0.0, 0.0)):
        with pytest.raises(ValueError, match="class_weight must be None"):
            abc_loss(logits, labels, class_weight=bad)
    with pytest.raises(ValueError, match="max_elements must be a positive integer"):
        sx.run_onnx("model.onnx", [np.ones((2, 2))], max_elements=0)


def test_pooling_laplacian_transport_and_affinity_inputs_are_named():
    """Sets without elements pool to 0 without a mask too (an IndexError for "max", NaN for
    "mean"); a Laplacian of a 2-D or integer affinity, a transport similarity of mismatched
    shapes and a complex affinity are named (unpacking, finfo or broadcast errors before)."""
    from skset.cluster import estimate_n_clusters
    from skset.nn import masked_pool, normalized_laplacian
    from skset.ot import transport_similarity

    for how in ("sum", "mean", "max"):
        out = masked_pool(torch.zeros(2, 0, 3), None, how)
        assert out.shape == (2, 3) and (out == 0).all()
    for bad in (torch.ones(4, 4), torch.ones(1, 4, 4, dtype=torch.long), torch.ones(1, 3, 4)):
        with pytest.raises(ValueError, match="affinity must be a float tensor"):
            normalized_laplacian(bad)
    with pytest.raises(ValueError, match="plan and similarity must be tensors of one shape"):
        transport_similarity(torch.ones(1, 2, 3), torch.ones(1, 3, 2))
    with pytest.raises(TypeError, match="complex"):
        estimate_n_clusters(np.eye(4) + 0j)


def test_read_ts_refuses_malformed_cases(tmp_path):
    """A case that lost its label (its last dimension read as one, outside the declared labels),
    a case with another number of dimensions, a labelled case without ':' are named with their
    line; an empty @data section gives labels of str, as documented."""
    from skset.datasets import read_ts

    head = "@problemName t\n@univariate false\n@classLabel true a b\n@data\n"
    for body, match in (("1,2,3:4,5,6:a\n1,2,3:4,5,6\n", r":6: label '4,5,6' is not one of"),
                        ("1,2,3:4,5,6:a\n1,2,3:b\n", r":6: 1 dimension\(s\), but the first case"),
                        ("1,2,3:4,5,6:a\n1,2,3\n", r":6: a case needs its label")):
        path = tmp_path / "bad.ts"
        path.write_text(head + body)
        with pytest.raises(ValueError, match=match):
            read_ts(path)
    path.write_text(head)
    X, y = read_ts(path)
    assert X == [] and y.dtype.kind == "U"


def test_generators_check_the_size_range_not_the_draws():
    """make_normal_var and make_unique_count accept or refuse a set_size range whatever
    random_state (they checked the drawn sizes); bools are not numbers for noise and
    mutation_rate."""
    from skset.datasets import (
        make_circles_instances,
        make_motif_order,
        make_normal_var,
        make_unique_count,
    )

    for seed in range(8):
        with pytest.raises(ValueError, match="set sizes must exceed ddof=1"):
            make_normal_var(1, set_size=(1, 3), ddof=1, random_state=seed)
        with pytest.raises(ValueError, match="exceeds the smallest digit pool"):
            make_unique_count(1, set_size=(6, 100), random_state=seed)
    with pytest.raises(ValueError, match="noise"):
        make_circles_instances(2, 5, noise=True)
    with pytest.raises(ValueError, match="mutation_rate"):
        make_motif_order(2, min_length=16, max_length=16, mutation_rate=True)


def test_export_helpers_name_values_too_large_and_iter_transform_checks_sets():
    """pad_sets of 1e40 in float32 says too large (it said infinity: the cast came first);
    iter_transform refuses a non-iterable at the call, not at the first chunk."""
    from skset import OTKEmbedding
    from skset.export import pad_sets
    from skset.utils import iter_transform

    with pytest.raises(ValueError, match="as large as 1e\\+40"):
        pad_sets([np.full((3, 2), 1e40)], dtype="float32")
    otk = OTKEmbedding(n_supports=2, random_state=0).fit([np.eye(3)[:, :2]] * 4)
    with pytest.raises(TypeError, match="sets must be an iterable"):
        iter_transform(otk, 5)


def test_dilated_kernel_module_checks_its_arguments():
    """DilatedKernelPPV names bad dilations, thresholds and channels at construction and an
    input of another width in forward (IndexError, RuntimeError, or a silent sum of channels
    a one-channel fit never saw)."""
    from skset import DilatedKernelFeatures
    from skset.nn import DilatedKernelPPV

    thr = torch.zeros(1, 84, 3)
    with pytest.raises(ValueError, match="dilations"):
        DilatedKernelPPV([0], thr)
    with pytest.raises(ValueError, match="thresholds must be a tensor of shape"):
        DilatedKernelPPV([1, 2], thr)
    with pytest.raises(ValueError, match="channels must be None or"):
        DilatedKernelPPV([1], thr, torch.ones(1, 80, 2))
    rng = np.random.default_rng(0)
    m = DilatedKernelFeatures(random_state=0).fit([rng.normal(size=(30, 1)) for _ in range(4)])
    with pytest.raises(ValueError, match=r"x must be of shape \(B, n, 1\)"):
        m.to_module()(torch.zeros(2, 30, 3), torch.ones(2, 30, dtype=torch.bool))


def test_set_network_modules_name_bad_heads_points_and_pool_sizes():
    # n_heads=0 was a ZeroDivisionError, n_heads=-2 built and failed in forward; 1.7 seeds were
    # truncated to 1; pool_size=0 gave NaN and a negative one flipped the scaled mean's sign
    from skset.nn import ISAB, PMA, DeepSets, MultiheadAttention, SetTransformer

    for bad in (0, -2, 2.0, True):
        with pytest.raises(ValueError, match="n_heads=.* must be a positive integer"):
            SetTransformer(3, 8, 2, n_heads=bad)
        with pytest.raises(ValueError, match="n_heads=.* must be a positive integer"):
            MultiheadAttention(8, bad)
    with pytest.raises(ValueError, match="n_seeds=1.7 must be a positive integer"):
        PMA(8, 2, 1.7)
    with pytest.raises(ValueError, match="n_inducing=2.9 must be a positive integer"):
        ISAB(8, 2, 2.9)
    assert PMA(8, 2, np.int64(2)).seeds.shape == (2, 8)
    for bad in (0, -1.0, float("inf"), float("nan"), True):
        with pytest.raises(ValueError, match="pool_size=.* must be a positive finite number"):
            DeepSets(3, 4, 2, pooling="sized_mean", pool_size=bad)
    with pytest.raises(ValueError, match="norm='bogus' is not supported"):
        DeepSets(3, 4, 2, norm="bogus")  # refused also where the plain blocks ignore the norm


def test_pooling_sets_without_elements_gives_zeros_with_or_without_a_mask():
    # max pooling of a zero-width batch with a mask raised IndexError (amax of an empty dim);
    # sized_mean without a mask took log(0) and gave NaN
    from skset.nn import DeepSets
    from skset.nn.deep_sets import masked_pool

    x, mask = torch.randn(2, 0, 3), torch.zeros(2, 0, dtype=torch.bool)
    for how in ("sum", "mean", "max", "scaled_mean"):
        for m in (None, mask):
            assert torch.equal(masked_pool(x, m, how), torch.zeros(2, 3))
    net = DeepSets(3, 4, 2, pooling="sized_mean", pool_size=3.0, pooled_skip=True)
    torch.testing.assert_close(net(x), net(x, mask))
    assert torch.isfinite(net(x)).all()


def test_nested_attention_records_resume_the_outer_one():
    from skset.nn import SetTransformer, record_attention

    net = SetTransformer(3, 8, 2, n_layers=1, n_heads=2)
    x = torch.randn(2, 5, 3)
    with record_attention(net) as outer:
        with record_attention(net) as inner:
            net(x)
        net(x)
    assert set(inner) == set(outer) == {"blocks.0", "pool"}


def test_a_prediction_that_raises_leaves_the_network_in_its_mode():
    from skset import DeepSetsClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(10)]
    clf = DeepSetsClassifier(hidden_size=4, max_iter=1, random_state=0, device="cpu")
    clf.fit(X, np.arange(10) % 2).module_.train()

    def fails(module, X_, M_):
        raise RuntimeError("a batch failed")

    with pytest.raises(RuntimeError, match="a batch failed"):
        clf._predict_batches(X, fails)
    assert clf.module_.training  # it stayed in eval mode


def test_otk_layer_refuses_at_construction_what_forward_would():
    # epsilon, method, sinkhorn_tol and a bool position_sigma were checked at the first forward
    for kw, what in ((dict(epsilon=-1.0), "epsilon"), (dict(epsilon=float("nan")), "epsilon"),
                     (dict(method="bogus"), "method"), (dict(sinkhorn_tol=-1.0), "sinkhorn_tol"),
                     (dict(position_sigma=True), "position_sigma")):
        with pytest.raises(ValueError, match=what):
            OTKLayer(3, 2, **kw)


@pytest.mark.parametrize("method", ["log", "exp", "auto"])
def test_sinkhorn_names_sets_without_elements_and_plans_without_supports(method):
    # without a mask, sets of no element gave an empty plan (log, exp) or an IndexError, and no
    # supports a math domain error; "auto" named them only through its mask
    with pytest.raises(ValueError, match=r"shape \(2, 0, 3\): sets without elements"):
        sinkhorn(torch.randn(2, 0, 3), epsilon=0.5, method=method)
    with pytest.raises(ValueError, match=r"shape \(2, 4, 0\): no supports"):
        sinkhorn(torch.randn(2, 4, 0), epsilon=0.5, method=method)
    assert sinkhorn(torch.randn(0, 4, 3), epsilon=0.5, method=method).shape == (0, 4, 3)


def test_set_network_sizes_accept_numpy_and_tensor_integers():
    from skset.nn import PMA, DeepSets, SetTransformer

    assert DeepSets(3, 4, 2, pooling="sized_mean", pool_size=np.int64(8)).pool_size == 8
    assert DeepSets(3, 4, 2, pooling="sized_mean", pool_size=np.float32(8)).pool_size == 8
    assert SetTransformer(3, 8, 2, n_heads=torch.tensor(2)).blocks[0].mab.attn.n_heads == 2
    assert PMA(8, 2, torch.tensor(3)).seeds.shape == (3, 8)
    with pytest.raises(ValueError, match="n_inducing=4.0 must be a positive integer"):
        SetTransformer(3, 8, 2, n_inducing=4.0)


def test_dropout_generator_must_be_a_generator():
    from skset.nn import SetTransformer

    net = SetTransformer(3, 8, 2, n_heads=2, dropout=0.2)
    with pytest.raises(TypeError, match="generator must be a torch.Generator or None, got int"):
        net.set_dropout_generator(0)
    assert net.set_dropout_generator(torch.Generator()) is net
