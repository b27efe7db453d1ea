"""Persistence: skset.save / skset.load without pickle, and GPU-fitted models on CPU-only machines."""

import copy
import io
import json
import os
import pickle
import warnings

import joblib
import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, clone, is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression

import skset
from skset import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    DilatedKernelFeatures,
    NystromFeatures,
    OTKClassifier,
    OTKEmbedding,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

NN = dict(hidden_size=8, n_layers=1, max_iter=2, batch_size=8, random_state=0)
ESTIMATORS = [
    NystromFeatures(n_components=6, random_state=0),
    NystromFeatures(n_components=5, window=2, normalize=False, dtype="float64", random_state=0),
    OTKEmbedding(n_supports=3, random_state=0),
    OTKEmbedding(n_supports=3, n_references=2, fit_method="wasserstein", position_sigma=0.5,
                 dtype="float64", random_state=0),
    DilatedKernelFeatures(n_thresholds=3, max_dilations=2, random_state=0),
    DilatedKernelFeatures(n_thresholds=2, max_dilations=3, dtype="float64", random_state=0),
    SetTransformerClassifier(n_heads=2, n_inducing=3, **NN),
    SetTransformerRegressor(n_heads=2, n_inducing=None, norm="set", residual="clean", **NN),
    DeepSetsClassifier(**NN),
    DeepSetsRegressor(norm="set", residual="clean", dtype="float64", **NN),
    OTKClassifier(n_components=6, n_supports=3, max_iter=2, random_state=0),
    OTKRegressor(n_components=None, n_supports=3, n_references=2, window=2, max_iter=2,
                 random_state=0),
]
IDS = [type(e).__name__ + str(i) for i, e in enumerate(ESTIMATORS)]


def _data(n=20, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=i % 2, size=(int(rng.integers(3, 10)), 3)) for i in range(n)]
    return X, np.arange(n) % 2


def _fit(est):
    X, y = _data()
    if is_regressor(est):
        y = y + 0.1 * np.arange(len(y))
    elif is_classifier(est):
        y = np.array(["a", "b"])[y]  # string classes must survive too
    # on the CPU: the tests below pretend it was a GPU (the real GPU round trip is
    # test_cuda_fitted_model_loads_on_cpu, on machines with one)
    return clone(est).set_params(device="cpu").fit(X, y)


def _outputs(est, X):
    outs = []
    if is_classifier(est):
        outs += [est.predict_proba(X), est.predict(X)]
    elif is_regressor(est):
        outs.append(est.predict(X))
    out = est.transform(X)
    outs.append(np.concatenate(list(out)) if isinstance(out, list) else out)
    return outs


def _assert_same(a, b):
    X, _ = _data(seed=1)
    for u, v in zip(_outputs(a, X), _outputs(b, X)):
        np.testing.assert_array_equal(u, v)


def _set_device(est, device):
    """Pretend ``est`` (and its nested estimators) was fitted on ``device``."""
    est.device_ = torch.device(device)
    for v in vars(est).values():
        if isinstance(v, BaseEstimator) and hasattr(v, "device_"):
            _set_device(v, device)


def test_every_public_estimator_is_covered():
    public = {n for n in skset.__all__
              if isinstance(getattr(skset, n), type) and issubclass(getattr(skset, n), BaseEstimator)}
    # the clustering estimators take other inputs; their save/load test is in test_cluster.py
    assert public <= {type(e).__name__ for e in ESTIMATORS} | {"ABCClusterer",
                                                               "EigengapSpectralClustering"}


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_save_load_round_trip(est, tmp_path):
    fitted = _fit(est)
    path = tmp_path / "model.skset"
    skset.save(fitted, path)
    loaded = skset.load(path)
    assert type(loaded) is type(fitted)
    assert loaded.get_params() == fitted.get_params()
    _assert_same(fitted, loaded)
    assert loaded.device_ == torch.device("cpu")
    # the file opens with the restricted unpickler alone: it holds no pickled Python objects
    payload = torch.load(path, weights_only=True)
    assert payload["estimator"]["class"] == type(est).__name__
    assert payload["skset_version"] == skset.__version__


@pytest.mark.parametrize("est", [e for e in ESTIMATORS if hasattr(e, "warm_start")][:2]
                         + [ESTIMATORS[-1]], ids=lambda e: type(e).__name__)
def test_loaded_model_warm_starts_like_the_original(est):
    fitted = _fit(est)
    buf = io.BytesIO()
    skset.save(fitted, buf)
    buf.seek(0)
    loaded = skset.load(buf)
    X, y = _data(seed=2)
    if is_regressor(est):
        y = y.astype(float)
    elif is_classifier(est):
        y = np.array(["a", "b"])[y]
    for m in (fitted, loaded):
        m.set_params(warm_start=True, max_iter=1).fit(X, y)
    _assert_same(fitted, loaded)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_model_loaded_in_inference_mode_trains_further(est):
    """A model loaded (``skset.load`` or unpickled) inside ``torch.inference_mode()``, as by a
    serving process, keeps ordinary tensors: a later ``partial_fit`` (or warm start) trains it
    as the original (it raised torch's "Inference tensors cannot be saved for backward")."""
    fitted = _fit(est)
    buf = io.BytesIO()
    skset.save(fitted, buf)
    blob = pickle.dumps(fitted)
    with torch.inference_mode():
        buf.seek(0)
        loaded = [skset.load(buf), pickle.loads(blob)]
    if not hasattr(est, "partial_fit"):
        return _assert_same(fitted, loaded[0])
    X, y = _data(seed=2)
    if is_regressor(est):
        y = y.astype(float)
    elif is_classifier(est):
        y = np.array(["a", "b"])[y]
    for m in (fitted, *loaded):
        m.partial_fit(X, y)
    _assert_same(fitted, loaded[0])
    _assert_same(fitted, loaded[1])


def test_unfitted_estimator_round_trip(tmp_path):
    est = OTKEmbedding(n_supports=4, epsilon=0.1)
    skset.save(est, tmp_path / "m")
    loaded = skset.load(tmp_path / "m")
    assert loaded.get_params() == est.get_params()
    with pytest.raises(NotFittedError):
        loaded.transform(_data()[0])


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_gpu_fitted_model_unpickles_on_cpu(est, monkeypatch):
    fitted = _fit(est)
    expected = _outputs(fitted, _data(seed=1)[0])
    _set_device(fitted, "cuda")  # as if fitted on a GPU: the pickle records device "cuda"
    blob = pickle.dumps(fitted)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="not available here; it is loaded on the CPU"):
        loaded = pickle.loads(blob)
    assert loaded.device_ == torch.device("cpu")
    for v in vars(loaded).values():
        if isinstance(v, torch.nn.Module):
            assert all(p.device.type == "cpu" for p in v.parameters())
    for u, v in zip(expected, _outputs(loaded, _data(seed=1)[0])):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("est", ESTIMATORS[::3], ids=IDS[::3])
def test_gpu_fitted_model_loads_on_cpu_with_skset_load(est, monkeypatch):
    fitted = _fit(est)
    _set_device(fitted, "cuda")
    buf = io.BytesIO()
    skset.save(fitted, buf)
    buf.seek(0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="loaded on the CPU"):
        loaded = skset.load(buf)
    assert loaded.device_ == torch.device("cpu")
    _set_device(fitted, "cpu")
    _assert_same(fitted, loaded)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_cuda_fitted_model_loads_on_cpu(est, monkeypatch):
    """Fitted on a real GPU, then pickled and saved; both load on a machine without CUDA and
    give the GPU's outputs up to float32 rounding."""
    X, y = _data()
    if is_regressor(est):
        y = y + 0.1 * np.arange(len(y))
    fitted = clone(est).set_params(device="cuda").fit(X, y)
    assert fitted.device_.type == "cuda"
    expected = _outputs(fitted, _data(seed=1)[0])
    blob, buf = pickle.dumps(fitted), io.BytesIO()
    skset.save(fitted, buf)
    buf.seek(0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="loaded on the CPU"):
        loaded = [pickle.loads(blob), skset.load(buf)]
    for m in loaded:
        assert m.device_ == torch.device("cpu")
        for u, v in zip(expected, _outputs(m, _data(seed=1)[0]), strict=True):
            np.testing.assert_allclose(u, v, rtol=1e-3, atol=1e-3)


class _Evil:
    """Unpickling this creates a file: the proof that code ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_malicious_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    payload = {"format": "skset-estimator", "format_version": 1,
               "skset_version": skset.__version__, "estimator": _Evil(marker)}
    torch_file = tmp_path / "evil.skset"
    torch.save(payload, torch_file)
    pickle_file = tmp_path / "evil.pkl"
    with open(pickle_file, "wb") as f:
        pickle.dump(_Evil(marker), f)
    for path in (torch_file, pickle_file):
        with pytest.raises(ValueError, match="refusing to load|not a file written by skset.save"):
            skset.load(path)
    assert not marker.exists()
    # a plain pickle / joblib dump of a real skset model is refused as well
    jl = tmp_path / "model.joblib"
    joblib.dump(_fit(ESTIMATORS[2]), jl)
    with pytest.raises(ValueError):
        skset.load(jl)
    pickle.loads(pickle.dumps(_Evil(marker)))  # sanity: the payload does run when unpickled
    assert marker.exists()


def _tampered(tmp_path, change):
    path = tmp_path / "m.skset"
    skset.save(_fit(ESTIMATORS[2]), path)
    payload = torch.load(path, weights_only=True)
    change(payload)
    torch.save(payload, path)
    return path


def test_version_mismatch_is_a_clear_error(tmp_path):
    path = _tampered(tmp_path, lambda p: p.update(skset_version="0.0.1"))
    with pytest.raises(ValueError, match="saved with skset 0.0.1.*strict_version=False"):
        skset.load(path)
    with pytest.warns(UserWarning, match="saved with skset 0.0.1"):
        est = skset.load(path, strict_version=False)
    assert est.transform(_data()[0]).shape[0] == 20
    assert not hasattr(skset.load(_tampered(tmp_path, lambda p: None)), "_state_version")


def test_attribute_missing_from_another_version_is_named(tmp_path):
    """A file of another version that lacks a fitted attribute this version reads: the
    AttributeError where it is read names the version (a bare one before)."""
    def older(p):
        p.update(skset_version="0.0.1")
        name = next(k for k in p["estimator"]["attributes"] if k.endswith("_") and k != "device_")
        del p["estimator"]["attributes"][name]
        older.name = name
    path = _tampered(tmp_path, older)
    with pytest.warns(UserWarning, match="saved with skset 0.0.1"):
        est = skset.load(path, strict_version=False)
    with pytest.raises(AttributeError, match=f"{older.name}.*written by skset 0.0.1.*refit"):
        getattr(est, older.name)
    refit = copy.deepcopy(est).fit(_data()[0])  # a refit by this version: no trace of the file
    assert not hasattr(refit, "_state_version")
    assert not hasattr(est, older.name)  # hasattr and getattr's default behave as before
    assert getattr(est, "no_such_thing_", 3) == 3
    with pytest.raises(AttributeError, match="has no attribute 'no_such'"):
        est.no_such  # noqa: B018
    path = _tampered(tmp_path, lambda p: p.update(format_version=99))
    with pytest.raises(ValueError, match="format version 99"):
        skset.load(path)


def test_unknown_class_and_bad_attributes_are_refused(tmp_path):
    path = _tampered(tmp_path, lambda p: p["estimator"].update({"class": "LogisticRegression"}))
    with pytest.raises(ValueError, match="'LogisticRegression' is not a skset estimator"):
        skset.load(path)
    path = _tampered(tmp_path, lambda p: p["estimator"]["attributes"].update(__class__=1))
    with pytest.raises(ValueError, match="invalid attribute name"):
        skset.load(path)
    # names of the class's methods and properties: the loaded object would hide them (its
    # transform a string, its repr a TypeError)
    for name in ("fit", "get_params"):
        path = _tampered(tmp_path, lambda p, k=name: p["estimator"]["attributes"].update({k: 3}))
        with pytest.raises(ValueError, match=f"invalid attribute name '{name}'"):
            skset.load(path)
    path = _tampered(tmp_path, lambda p: p["estimator"].update(params='{"no_such_param": 1}'))
    with pytest.raises(ValueError, match="no_such_param"):
        skset.load(path)
    not_skset = tmp_path / "x.txt"
    not_skset.write_text("hello")
    with pytest.raises(ValueError, match="not a file written by skset.save"):
        skset.load(not_skset)


def test_weights_that_do_not_fit_the_architecture_are_refused(tmp_path):
    def shrink(p):
        params = p["estimator"]["params"].replace('"hidden_size": 8', '"hidden_size": 4')
        p["estimator"]["params"] = params

    path = tmp_path / "ds.skset"
    skset.save(_fit(ESTIMATORS[6]), path)
    payload = torch.load(path, weights_only=True)
    shrink(payload)
    torch.save(payload, path)
    with pytest.raises(ValueError, match="do not fit the architecture"):
        skset.load(path)


def test_save_refuses_what_it_cannot_store(tmp_path):
    with pytest.raises(TypeError, match="public skset estimators"):
        skset.save(LogisticRegression(), tmp_path / "lr")
    est = OTKEmbedding(n_supports=2, random_state=np.random.RandomState(0)).fit(_data()[0])
    with pytest.warns(UserWarning, match="random_state") as rec:
        skset.save(est, tmp_path / "rs")
    assert {r.filename for r in rec} == {__file__}  # the caller's line (it pointed inside save)
    loaded = skset.load(tmp_path / "rs")
    assert loaded.random_state is None
    np.testing.assert_array_equal(loaded.transform(_data()[0]), est.transform(_data()[0]))


def test_load_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        skset.load(os.fspath(tmp_path / "absent.skset"))


def test_pickle_still_works_without_warning():
    est = _fit(ESTIMATORS[4])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        loaded = pickle.loads(pickle.dumps(est))
    _assert_same(est, loaded)


def _round_trip(est):
    buf = io.BytesIO()
    skset.save(est, buf)
    buf.seek(0)
    return skset.load(buf)


def test_what_a_fit_accepts_is_saved():
    X, y = _data()
    # class weights keyed by numpy integers (dict(zip(np.unique(y), ...))) or by bools
    keys = np.unique(y)
    est = DeepSetsClassifier(class_weight=dict(zip(keys, [1.0, 3.0])), **NN).fit(X, y)
    _assert_same(est, _round_trip(est))
    yb = y.astype(bool)
    est = DeepSetsClassifier(class_weight={True: 1.0, False: 3.0}, **NN).fit(X, yb)
    loaded = _round_trip(est)
    assert loaded.class_weight == {True: 1.0, False: 3.0} and loaded.classes_.dtype == bool
    # labels in big-endian order (read from a file): stored in native order
    est = DeepSetsClassifier(**NN).fit(X, y.astype(">i4"))
    np.testing.assert_array_equal(_round_trip(est).predict(X), est.predict(X))
    # the dtype given as an object: stored by name
    for dtype in (torch.float64, np.float64):
        est = OTKEmbedding(n_supports=2, dtype=dtype, random_state=0).fit(X)
        loaded = _round_trip(est)
        assert loaded.dtype == "float64"
        np.testing.assert_array_equal(loaded.transform(X), est.transform(X))
    # metadata routing's requests are no fitted state
    import sklearn

    with sklearn.config_context(enable_metadata_routing=True):
        est = DeepSetsClassifier(**NN).set_fit_request(sample_weight=True).fit(X, y)
        np.testing.assert_array_equal(_round_trip(est).predict(X), est.predict(X))


def _entry(kind, **fields):
    return {"__skset__": kind, **fields}


@pytest.mark.parametrize("name, value", [
    ("mean_", _entry("np_scalar", dtype="<f8")),
    ("mean_", _entry("np_scalar", dtype="bogus", value=1)),
    ("mean_", _entry("np_scalar", dtype="O", value=1)),
    ("mean_", _entry("tuple")),
    ("mean_", _entry("dict", keys=["a"])),
    ("mean_", _entry("ndarray_str", dtype="<U1", shape=[1], items=5)),
    ("device_", _entry("device", value="banana")),
    ("classes_", None),  # missing: the network cannot be rebuilt
])
def test_malformed_entries_are_format_errors(tmp_path, name, value):
    def change(p):
        attrs = p["estimator"]["attributes"]
        if value is None:
            attrs.pop(name)
        else:
            attrs[name] = value

    path = tmp_path / "ds.skset"
    skset.save(_fit(ESTIMATORS[8]), path)
    payload = torch.load(path, weights_only=True)
    change(payload)
    torch.save(payload, path)
    with pytest.raises(ValueError, match=f"{name}|classes_"):
        skset.load(path)


def test_malformed_parameters_and_a_lost_standardisation_are_refused(tmp_path):
    path = tmp_path / "ds.skset"
    est = _fit(ESTIMATORS[8])
    skset.save(est, path)
    payload = torch.load(path, weights_only=True)
    payload["estimator"]["params"] = '{"class_weight": {"__dict__": 5}}'
    torch.save(payload, path)
    with pytest.raises(ValueError, match="malformed parameters"):
        skset.load(path)
    payload = torch.load(io.BytesIO(_saved(est)), weights_only=True)
    payload["estimator"]["attributes"].pop("mean_")
    torch.save(payload, path)
    loaded = skset.load(path)  # a legacy model has no mean_: only the prediction can tell
    with pytest.raises(ValueError, match="standardize=True but no fitted mean_"):
        loaded.predict(_data()[0])


def _saved(est) -> bytes:
    buf = io.BytesIO()
    skset.save(est, buf)
    return buf.getvalue()


def test_numpy_strings_in_parameters_and_fitted_state_round_trip():
    """``class_weight`` keyed by ``np.unique``'s labels (numpy strings) and a string parameter
    given as one: ``skset.save`` writes plain strings, which ``skset.load`` reads (it refused the
    file it had written as a foreign pickle)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 2)) for _ in range(12)]
    y = np.array(["cat", "dog"] * 6)
    est = skset.DeepSetsClassifier(hidden_size=4, n_layers=1, max_iter=1, random_state=0,
                                   class_weight=dict(zip(np.unique(y), [1.0, 3.0])),
                                   pooling=np.array(["mean", "max"])[1], device="cpu").fit(X, y)
    buf = io.BytesIO()
    skset.save(est, buf)
    buf.seek(0)
    loaded = skset.load(buf)
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
    assert loaded.get_params()["class_weight"] == {"cat": 1.0, "dog": 3.0}


def test_a_model_fitted_on_a_gpu_index_this_machine_lacks_loads_on_the_cpu(monkeypatch):
    """A model fitted on ``cuda:1`` unpickled where CUDA has one device: loaded on the CPU with
    the warning (it kept ``cuda:1`` and failed at the first tensor moved there), and
    ``device="cuda:3"`` there is refused by name, not by torch inside ``fit``."""
    fitted = _fit(ESTIMATORS[0])
    _set_device(fitted, "cuda:1")
    blob = pickle.dumps(fitted)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.warns(UserWarning, match="not available here; it is loaded on the CPU"):
        loaded = pickle.loads(blob)
    assert loaded.device_ == torch.device("cpu")
    from skset._torch import resolve_device

    with pytest.raises(ValueError, match="has 1 CUDA device"):
        resolve_device("cuda:3")


def test_values_that_fit_accepts_are_saved(tmp_path):
    """A class weight keyed by float labels (``np.unique`` of float ``y``) or given as a pandas
    Series, and ``dtype=float``, save and load (refused by ``skset.save`` before, though fit and
    pickle took them)."""
    pd = pytest.importorskip("pandas")
    X, y = _data()
    for params, labels in (({"class_weight": {0.0: 1.0, 1.0: 3.0}}, y.astype(float)),
                           ({"class_weight": pd.Series([1.0, 3.0])}, y),
                           ({"dtype": float}, y)):
        est = SetTransformerClassifier(n_heads=2, n_inducing=3, **NN, **params).fit(X, labels)
        path = tmp_path / "m.skset"
        skset.save(est, path)
        np.testing.assert_array_equal(skset.load(path).predict_proba(X), est.predict_proba(X))
    assert skset.load(path).dtype == "float64"


def test_load_checks_the_parameters_and_refuses_bytes(tmp_path):
    """A file whose parameters a fit would refuse is refused at load, by name (a torch error
    while the module was rebuilt, or a model that loaded and predicted); a file's bytes given
    in place of a path get a short ``TypeError`` (the whole file was quoted in a ValueError)."""
    def bad(p):
        params = json.loads(p["estimator"]["params"])
        params["n_supports"] = -4
        p["estimator"]["params"] = json.dumps(params)
    with pytest.raises(ValueError, match="saved with invalid parameters.*n_supports=-4"):
        skset.load(_tampered(tmp_path, bad))
    buf = io.BytesIO()
    skset.save(_fit(ESTIMATORS[2]), buf)
    data = buf.getvalue()
    with pytest.raises(TypeError, match="path or a binary file object, got bytes"):
        skset.load(data)
    assert isinstance(skset.load(io.BytesIO(data)), OTKEmbedding)
