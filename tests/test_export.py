"""Export of fitted estimators (skset.export): the ONNX graph run by onnxruntime, and the
torch.export program, against the estimator's own outputs on sets of several sizes, in batches cut
differently from the one traced at export."""

import numpy as np
import pytest
import torch

import skset
from skset import export as sx

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning",
    "ignore:You are using the legacy TorchScript-based ONNX export:DeprecationWarning",
)
torch.set_num_threads(1)


def _data(seed=0, n_sets=24, d=3):
    rng = np.random.default_rng(seed)
    X = [rng.normal(3.0, 2.0, size=(rng.integers(3, 10), d)) for _ in range(n_sets)]
    y = np.array([s[:, 0].max() for s in X])
    labels = np.where(y > np.median(y), "high", "low")
    # unseen sets of several sizes, a longer one among them
    X_new = [rng.normal(3.0, 2.0, size=(k, d)) for k in (1, 4, 2, 9, 17, 3, 6)]
    return X, y, labels, X_new


def _fit(kind, window=1):
    X, y, labels, X_new = _data()
    small = dict(max_iter=2, random_state=0, device="cpu")
    kmers = {} if window == 1 else {"window": window}  # the networks: "auto" by default
    st = dict(hidden_size=8, n_layers=1, n_heads=2, **small, **kmers)
    ests = {
        # the pooled skip (a masked mean and max of the raw elements) exported too
        "st_clf": lambda: skset.SetTransformerClassifier(n_inducing=3, pooled_skip=True, **st),
        "st_reg": lambda: skset.SetTransformerRegressor(n_inducing=None, n_seeds=2, decoder="sab",
                                                       norm="set", residual="clean", **st),
        "ds_clf": lambda: skset.DeepSetsClassifier(hidden_size=8, pooling="max", **small,
                                                   **kmers),
        # the scaled mean (its training sets' mean size a buffer)
        "ds_scaled": lambda: skset.DeepSetsClassifier(hidden_size=8, pooling="scaled_mean", **small),
        # the sized mean: the decoder reads each set's size too
        "ds_sized": lambda: skset.DeepSetsClassifier(hidden_size=8, pooling="sized_mean", **small),
        "ds_reg": lambda: skset.DeepSetsRegressor(hidden_size=8, pooling="mean", norm="set",
                                                  residual="clean", pooled_skip=True, **small),
        "otk_clf": lambda: skset.OTKClassifier(n_components=6, n_supports=3, window=window,
                                               position_sigma=0.5, max_iter=1, random_state=0,
                                               device="cpu"),
        "otk_reg": lambda: skset.OTKRegressor(n_components=0, n_supports=3, max_iter=1,
                                              random_state=0, device="cpu"),
        "nystrom": lambda: skset.NystromFeatures(n_components=6, window=window, random_state=0,
                                                 device="cpu"),
        "otk_emb": lambda: skset.OTKEmbedding(n_supports=3, sinkhorn_iter=20, sinkhorn_tol=None,
                                              random_state=0, device="cpu"),
        # three channels: each kernel sums its own subset of them
        "dilated": lambda: skset.DilatedKernelFeatures(n_thresholds=3, max_dilations=3,
                                                       random_state=0, device="cpu"),
    }
    est = ests[kind]()
    if kind in ("nystrom", "otk_emb", "dilated"):
        est.fit(X)
    else:
        est.fit(X, y if kind.endswith("reg") else labels)
    if kind == "ds_sized":  # two steps from zero barely move it: make the sizes count
        with torch.no_grad():
            est.module_.size_weight.copy_(torch.linspace(-2.0, 2.0, 8))
    # with k-mers, the sets shorter than a k-mer (1 and 2 elements for 3-mers) are one k-mer each
    return est, X_new


def _check_outputs(est, out, X_new):
    """Every output equals the estimator's method of the same name (float32 tolerance)."""
    assert out, "no outputs"
    for name, value in out.items():
        if name == "predict_index":
            np.testing.assert_array_equal(est.classes_[value], est.predict(X_new))
            continue
        if name == "predict" and "predict_index" in out:  # labels from the model's metadata
            np.testing.assert_array_equal(value, est.predict(X_new))
            continue
        ref = getattr(est, name)(X_new)
        if isinstance(ref, list):  # NystromFeatures: per-set features
            assert len(value) == len(ref)
            for v, r in zip(value, ref):
                np.testing.assert_allclose(v, r, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(r).max()))
            continue
        assert value.shape == ref.shape, name
        np.testing.assert_allclose(value, ref, rtol=1e-5,
                                   atol=1e-5 * max(1.0, float(np.abs(ref).max())), err_msg=name)


KINDS = ["st_clf", "st_reg", "ds_clf", "ds_scaled", "ds_sized", "ds_reg", "otk_clf", "otk_reg",
         "nystrom", "otk_emb", "dilated"]


@pytest.mark.parametrize("kind", KINDS)
def test_onnx_matches_estimator(kind, tmp_path):
    """Legacy (TorchScript) exporter, fast: the ONNX outputs equal the estimator's, on batches cut
    by a small element budget (other batch sizes and padded lengths than at export)."""
    est, X_new = _fit(kind)
    path = sx.export_onnx(est, tmp_path / "model.onnx", dynamo=False)
    out = sx.run_onnx(path, X_new, max_elements=20)
    expected = {"st_clf": 5, "ds_clf": 5, "ds_scaled": 5, "ds_sized": 5, "otk_clf": 5, "nystrom": 1,
                "otk_emb": 1, "dilated": 1}.get(kind, 2)
    assert len(out) == expected
    _check_outputs(est, out, X_new)


@pytest.mark.parametrize("kind", ["st_clf", "otk_clf"])
def test_onnx_session_on_extra_padding_and_single_set(kind, tmp_path):
    """Raw onnxruntime on hand-padded inputs: extra padding columns full of garbage, and a batch of
    one set, give the estimator's decision values."""
    est, X_new = _fit(kind)
    path = sx.export_onnx(est, tmp_path / "model.onnx", dynamo=False)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x, mask = sx.pad_sets(X_new, n_max=25)
    x[~mask] = 1e4  # padding values must not matter
    decision, proba, index, z = session.run(None, {"x": x, "mask": mask})
    ref = est.decision_function(X_new)
    np.testing.assert_allclose(decision, ref, rtol=1e-5, atol=1e-5 * max(1, np.abs(ref).max()))
    np.testing.assert_allclose(proba, est.predict_proba(X_new), atol=1e-6)
    one = session.run(["decision_function"], dict(zip(("x", "mask"), sx.pad_sets(X_new[3:4]))))
    np.testing.assert_allclose(one[0], ref[3:4], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind, window", [("st_clf", 3), ("ds_clf", 3), ("otk_clf", 3),
                                          ("nystrom", 2)])
def test_onnx_legacy_exports_kmers_with_any_set_size(kind, window, tmp_path):
    """The legacy exporter on networks and maps that read k-mers: sizes are read from the input
    (a Set Transformer's graph held the batch and k-mer count of its tracing example), so other
    batches and set sizes than at export give the estimator's outputs."""
    est, X_new = _fit(kind, window)
    assert est.window_ == window
    path = sx.export_onnx(est, tmp_path / "model.onnx", dynamo=False)
    _check_outputs(est, sx.run_onnx(path, X_new, max_elements=20), X_new)


@pytest.mark.slow
@pytest.mark.parametrize("kind, window", [("st_clf", 1), ("otk_clf", 3), ("nystrom", 2),
                                          ("dilated", 1)])
def test_onnx_dynamo_matches_estimator(kind, window, tmp_path):
    """The default (torch.export-based) exporter, k-mers included."""
    est, X_new = _fit(kind, window)
    path = sx.export_onnx(est, tmp_path / "model.onnx")
    _check_outputs(est, sx.run_onnx(path, X_new, max_elements=20), X_new)


@pytest.mark.slow
def test_export_program_batch_not_bounded_by_sinkhorn_blocks(monkeypatch):
    """torch.export program of supervised OTK: the CPU Sinkhorn cuts batches into blocks of sets
    (here made tiny); the program must neither inherit a bound on the batch size from that nor
    change the outputs."""
    monkeypatch.setattr(skset.ot._sinkhorn, "_CPU_BLOCK_BYTES", 512)
    est, X_new = _fit("otk_reg")
    program = sx.export_program(est)
    X_big = X_new * 6  # 42 sets: many blocks of the eager solver
    x, mask = sx.pad_sets(X_big)
    pred, z = program.module()(torch.from_numpy(x), torch.from_numpy(mask))
    ref = est.predict(X_big)
    np.testing.assert_allclose(pred.numpy(), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    np.testing.assert_allclose(z.numpy(), est.transform(X_big), rtol=1e-5, atol=1e-5)
    one, _ = program.module()(*map(torch.from_numpy, sx.pad_sets(X_new[:1])))
    np.testing.assert_allclose(one.numpy(), ref[:1], rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_serving_module_is_a_copy_and_standardises():
    est, X_new = _fit("ds_reg")
    module = sx.serving_module(est)
    assert module.net is not est.module_ and not module.training
    assert torch.equal(module.mean, torch.as_tensor(est.mean_, dtype=torch.float32))
    x, mask = sx.pad_sets(X_new)
    with torch.no_grad():
        pred, _ = module(torch.from_numpy(x), torch.from_numpy(mask))
    np.testing.assert_allclose(pred.numpy(), est.predict(X_new), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [
    lambda X: skset.OTKEmbedding(n_supports=3, sinkhorn_tol=None, sinkhorn_iter=20,
                                 random_state=0).fit([x + 50 for x in X]),
    lambda X: skset.DeepSetsRegressor(hidden_size=4, max_iter=1, dtype="float64", random_state=0,
                                      device="cpu").fit(X, np.arange(len(X), dtype=float)),
])
def test_serving_module_shares_no_memory_and_checks_the_width(make):
    """A state loaded into the served module leaves the estimator as it was (its buffers were
    views of the fitted arrays of the same dtype: ``transform`` moved by 2.78, ``predict`` by
    0.50); sets of another width are refused by name (they broadcast into an output)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 7)), 2)) for _ in range(12)]
    est = make(X)
    before = est.transform(X) if hasattr(est, "transform") else est.predict(X)
    module = sx.serving_module(est)
    module.load_state_dict({k: torch.zeros_like(v) + 3.0 for k, v in module.state_dict().items()})
    after = est.transform(X) if hasattr(est, "transform") else est.predict(X)
    np.testing.assert_array_equal(np.asarray(after), np.asarray(before))
    x, mask = sx.pad_sets([s[:, :1] for s in X], dtype=np.float64)
    dtype = next(iter(module.state_dict().values())).dtype
    with pytest.raises(ValueError, match="1 features, but the model was fitted on 2"):
        module(torch.from_numpy(x).to(dtype), torch.from_numpy(mask))
    # sets in another dtype, a mask that is not boolean: named (torch's errors before)
    x, mask = (torch.from_numpy(a) for a in sx.pad_sets(X, dtype=np.float64))
    other = torch.float32 if dtype == torch.float64 else torch.float64
    with pytest.raises(ValueError, match=f"sets are {other}.*computes in {dtype}"):
        module(x.to(other), mask)
    with pytest.raises(ValueError, match="mask is torch.int64.*boolean"):
        module(x.to(dtype), mask.long())


def test_pad_sets_refuses_n_max_under_the_longest_set():
    with pytest.raises(ValueError, match="n_max=4 is shorter than the longest set"):
        sx.pad_sets([np.zeros((5, 2)), np.zeros((3, 2))], n_max=4)

def test_export_errors(tmp_path):
    X, _, _, _ = _data()
    emb = skset.OTKEmbedding(n_supports=3, random_state=0, device="cpu").fit(X)  # stops at tol
    with pytest.raises(ValueError, match="sinkhorn_iter"):
        sx.serving_module(emb)
    assert isinstance(sx.serving_module(emb, sinkhorn_iter=50), torch.nn.Module)
    with pytest.raises(ValueError, match="sinkhorn_method"):
        sx.serving_module(emb, sinkhorn_iter=50, sinkhorn_method="auto")
    with pytest.raises(TypeError, match="cannot be exported"):
        sx.serving_module(skset.EigengapSpectralClustering())
    with pytest.raises(Exception, match="not fitted"):
        sx.export_onnx(skset.DeepSetsClassifier(), tmp_path / "m.onnx")
    # export_onnx names what it cannot export as serving_module does (it once raised an
    # AttributeError on a Pipeline or a clusterer)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    pipe = make_pipeline(skset.OTKEmbedding(n_supports=2, random_state=0, device="cpu"),
                         LogisticRegression()).fit(X, np.arange(len(X)) % 2)
    for est in (pipe, skset.EigengapSpectralClustering()):
        for dynamo in (False, True):
            with pytest.raises(TypeError, match="cannot be exported"):
                sx.export_onnx(est, tmp_path / "m.onnx", dynamo=dynamo)


def test_run_onnx_refuses_what_predict_refuses(tmp_path):
    est, _ = _fit("ds_clf")
    path = sx.export_onnx(est, tmp_path / "m.onnx", dynamo=False)
    good = _data()[0][:2]
    for bad, match in (([np.zeros((0, 3))], "set 0"), ([good[0], np.full((3, 3), np.nan)], "set 1"),
                       ([], "no sets|empty|at least"), ([np.zeros((2, 4))], "4 features|features")):
        with pytest.raises(ValueError, match=match):
            sx.run_onnx(path, bad)
    np.testing.assert_array_equal(sx.run_onnx(path, good)["predict"], est.predict(good))


def test_otk_embedding_export_follows_its_output_parameters():
    X = _data()[0]
    emb = skset.OTKEmbedding(n_supports=3, sinkhorn_iter=20, sinkhorn_tol=None, random_state=0,
                             device="cpu").fit(X)
    x, mask = (torch.as_tensor(a) for a in sx.pad_sets(X))
    for params in ({}, {"center": False, "normalize": False}, {"normalize": False}):
        emb.set_params(**params)
        out = sx.serving_module(emb)(x, mask)[0].numpy()
        np.testing.assert_allclose(out, emb.transform(X), rtol=1e-5, atol=1e-5)


def test_nystrom_level_shape_kmers_export_program():
    # k-mers coded as level + shape (the default with window > 1): the exported program codes
    # them as transform does, for set sizes other than the traced example's
    from skset.export import export_program, pad_sets

    rng = np.random.default_rng(0)
    X = [np.cumsum(rng.normal(size=(int(rng.integers(6, 20)), 2)), 0) for _ in range(20)]
    nf = skset.NystromFeatures(n_components=8, window=3, random_state=0).fit(X, np.arange(20) % 2)
    assert nf.kmer_coding == "level_shape"
    batch = X[:5] + [X[5][:4]]
    x, m = pad_sets(batch)
    feats, mask = export_program(nf).module()(torch.as_tensor(x), torch.as_tensor(m))
    for i, ref in enumerate(nf.transform(batch)):
        np.testing.assert_allclose(feats[i][mask[i]].detach().numpy(), ref, rtol=1e-4, atol=1e-5)


def test_export_program_in_the_exp_domain():
    """``sinkhorn_method="exp"``, which the export guide offers: the exported program holds no
    data-dependent branch on the padding (torch.export refused it) and gives the log-domain
    program's embedding on padded batches."""
    X, _, _, _ = _data()
    emb = skset.OTKEmbedding(n_supports=3, sinkhorn_tol=None, sinkhorn_iter=20, epsilon=0.5,
                             random_state=0, device="cpu").fit(X)
    x, mask = map(torch.from_numpy, sx.pad_sets(X))
    assert not bool(mask.all())  # sets of several sizes: padding in the batch
    out = {m: sx.export_program(emb, sinkhorn_iter=20, sinkhorn_method=m).module()(x, mask)[0]
           for m in ("exp", "log")}
    np.testing.assert_allclose(out["exp"].numpy(), out["log"].numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["exp"].numpy(), emb.transform(X), rtol=1e-4, atol=1e-5)


def test_float64_otk_graph_of_the_legacy_exporter_agrees_to_1e12(tmp_path):
    """The module docstring's claim: a float64 OTKEmbedding (fixed iterations, no positions)
    exported with ``dynamo=False`` gives its transform to 1e-12."""
    rng = np.random.default_rng(0)
    X = [rng.normal(loc=i % 2, size=(int(rng.integers(4, 9)), 3)) for i in range(24)]
    X_new = [rng.normal(size=(int(rng.integers(1, 12)), 3)) for _ in range(7)]
    emb = skset.OTKEmbedding(n_supports=3, sinkhorn_tol=None, sinkhorn_iter=40, dtype="float64",
                             random_state=0, device="cpu").fit(X)
    path = sx.export_onnx(emb, tmp_path / "model.onnx", dynamo=False)
    out = sx.run_onnx(path, X_new)["transform"]
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, emb.transform(X_new), rtol=0, atol=1e-12)


def test_regressor_output_step_is_float64_for_targets_far_from_zero(tmp_path):
    """Targets of spread 0.4 around 1e7: the served module, the exported program and the ONNX graph
    apply the target scale and mean in float64, as ``predict`` does (in float32 they rounded the
    predictions to 1.0, float32's spacing at 1e7: 0.53 from ``predict``, R^2 0.54 for 0.94)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 10)), 2)) for _ in range(40)]
    y = 1e7 + np.array([s[:, 0].mean() for s in X])
    est = skset.OTKRegressor(n_components=8, n_supports=3, window=1, max_iter=2, random_state=0,
                             device="cpu").fit(X, y)
    ref = est.predict(X)
    tol = 1e-4 * float(est.y_scale_[0])  # float32 network, in the units of y
    x, mask = map(torch.from_numpy, sx.pad_sets(X))
    with torch.no_grad():
        served, z = sx.serving_module(est)(x, mask)
    program, _ = sx.export_program(est).module()(x, mask)
    onnx = sx.run_onnx(sx.export_onnx(est, tmp_path / "m.onnx", dynamo=False), X)["predict"]
    for out in (served.numpy(), program.detach().numpy(), onnx):
        np.testing.assert_allclose(out, ref, rtol=0, atol=tol)
    assert served.dtype == torch.float64 and onnx.dtype == np.float64
    assert z.dtype == torch.float32  # the network and its embedding stay in its dtype


@pytest.mark.parametrize("make", [
    lambda X: skset.DeepSetsClassifier(hidden_size=4, max_iter=1, window=1, random_state=0,
                                       device="cpu").fit(X, np.arange(len(X)) % 2),
    lambda X: skset.OTKEmbedding(n_supports=2, sinkhorn_iter=5, sinkhorn_tol=None,
                                 random_state=0, device="cpu").fit(X),
    lambda X: skset.NystromFeatures(n_components=4, window=1, random_state=0, device="cpu").fit(X),
])
def test_serving_modules_refuse_a_mask_or_sets_of_another_shape(make):
    """A mask of another element count is refused by name before the padding select broadcasts
    it (torch's RuntimeError before), as a 1-D mask is; so are sets that are not a 3-D tensor."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 8)), 2)) for _ in range(12)]
    module = sx.serving_module(make(X))
    x, mask = map(torch.from_numpy, sx.pad_sets(X))
    for bad in (mask[:, :-1], mask[0], mask[:1], mask[..., None]):
        with pytest.raises(ValueError, match=r"mask must have shape \(12, 7\)"):
            module(x, bad)
    with pytest.raises(ValueError, match=r"padded batch of sets \(B, n, 2\); got shape \(7, 2\)"):
        module(x[0], mask[0])
    with pytest.raises(TypeError, match="torch tensor"):
        module(x.numpy(), mask)


def test_dilated_serving_module_refuses_sets_of_no_float_dtype():
    """Integer sets are refused by name, as by the other served modules (torch's
    ``torch.finfo() requires a floating point input type`` before); sets of either float dtype
    and a 0/1 mask stay accepted, the module reads them itself."""
    rng = np.random.default_rng(1)
    X = [np.cumsum(rng.normal(size=(int(rng.integers(20, 40)), 2)), 0) for _ in range(6)]
    est = skset.DilatedKernelFeatures(n_thresholds=2, random_state=0, device="cpu").fit(X)
    module = sx.serving_module(est)
    x, mask = map(torch.from_numpy, sx.pad_sets(X))
    with pytest.raises(ValueError, match="sets are torch.int64.*computes in torch.float32"):
        module(x.long(), mask)
    for xx, mm in ((x, mask.long()), (x.double(), mask)):
        np.testing.assert_allclose(module(xx, mm)[0].numpy(), est.transform(X), atol=1e-6)


def test_run_onnx_nystrom_rows_with_dilation(tmp_path):
    """With dilated k-mers a set has ``max(1, n_i - (window - 1) * dilation)`` rows of features,
    as ``run_onnx``'s docstring says (it said ``n_i - window + 1``)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(8, 15)), 2)) for _ in range(12)]
    nf = skset.NystromFeatures(n_components=4, window=3, dilation=3, random_state=0,
                               device="cpu").fit(X)
    batch = X[:4] + [X[4][:2]]
    out = sx.run_onnx(sx.export_onnx(nf, tmp_path / "m.onnx", dynamo=False), batch)["transform"]
    assert [len(o) for o in out] == [max(1, len(s) - 6) for s in batch]
    _check_outputs(nf, {"transform": out}, batch)
    assert "max(1, n_i - (window - 1) * dilation)" in " ".join(sx.run_onnx.__doc__.split())


def test_export_refuses_an_estimator_class(tmp_path):
    """The class, not a fitted instance: a TypeError that says so (a missing ``self`` before)."""
    for call in (lambda: sx.serving_module(skset.OTKEmbedding),
                 lambda: sx.export_program(skset.DeepSetsRegressor),
                 lambda: sx.export_onnx(skset.NystromFeatures, tmp_path / "m.onnx", dynamo=False)):
        with pytest.raises(TypeError, match="fitted estimator instance, not the class"):
            call()
