"""Reproducibility of every public estimator with an integer ``random_state``: fits independent of
torch's and numpy's global generators and leaving them as they were, refits of one object, and
partial_fit streams. Two fits with one seed on one machine give bit-identical outputs.

Already covered elsewhere and not repeated here: two fresh fits compared (test_common.py), the Set
Transformer's dropout and torch's global generator (test_st_dropout.py), thread policies
(test_threads.py), a saved NystromFeatures / OTKEmbedding / OTKRegressor continuing its stream
(test_partial_fit_maps.py, test_partial_fit.py)."""

import copy
import pickle

import numpy as np
import pytest
import torch
from conftest import make_blob_instances
from sklearn.base import clone, is_classifier, is_regressor

from skset import (
    ABCClusterer,
    DeepSetsClassifier,
    DeepSetsRegressor,
    DilatedKernelFeatures,
    EigengapSpectralClustering,
    NystromFeatures,
    OTKClassifier,
    OTKEmbedding,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

NN = dict(hidden_size=8, n_layers=1, max_iter=2, batch_size=8, random_state=0)
OTKS = dict(n_components=6, n_supports=3, max_iter=2, batch_size=8, random_state=0)
ES = dict(early_stopping=True, validation_fraction=0.25)
ABC = dict(hidden_size=8, n_heads=2, max_steps=4, batch_size=4, eval_every=2, random_state=0)
ESTIMATORS = [
    NystromFeatures(n_components=6, random_state=0),
    NystromFeatures(n_components=5, window=2, max_samples=30, random_state=0),
    OTKEmbedding(n_supports=3, random_state=0),
    OTKEmbedding(n_supports=3, n_references=2, fit_method="wasserstein", position_sigma=0.5,
                 max_samples=30, barycenter_iter=3, random_state=0),
    SetTransformerClassifier(n_heads=2, n_inducing=3, **NN),
    SetTransformerClassifier(n_heads=2, dropout=0.3, point_init="normal", n_seeds=2, **ES, **NN),
    SetTransformerRegressor(n_heads=2, **NN),
    DeepSetsClassifier(**ES, **NN),
    DeepSetsRegressor(**NN),  # early_stopping="auto": a validation split
    OTKClassifier(**OTKS),
    OTKClassifier(solver="adam", fit_method="wasserstein", n_references=2, **ES, **OTKS),
    OTKRegressor(**ES, **OTKS),
    DilatedKernelFeatures(n_thresholds=3, max_dilations=2, random_state=0),
    ABCClusterer(input_similarity="rbf", **ABC),
    ABCClusterer(assign_labels="sklearn", n_clusters_rule="eigengap", instance_size=10,
                 n_validation_instances=3, **ABC),
    EigengapSpectralClustering(gamma=1.0, n_init=3, random_state=0),
]
IDS = [type(e).__name__ + str(i) for i, e in enumerate(ESTIMATORS)]
STREAMING = [e for e in ESTIMATORS if hasattr(e, "partial_fit")]
STREAMING_IDS = [i for e, i in zip(ESTIMATORS, IDS, strict=True) if hasattr(e, "partial_fit")]


def _sets(n=20, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=i % 2, size=(int(rng.integers(3, 10)), 3)) for i in range(n)]
    return X, np.arange(n) % 2


def _fit_args(est):
    if isinstance(est, ABCClusterer):
        return make_blob_instances()
    if isinstance(est, EigengapSpectralClustering):
        rng = np.random.default_rng(0)
        return (np.concatenate([rng.normal(size=(15, 2)), rng.normal(loc=5, size=(15, 2))]),)
    X, y = _sets()
    return X, y.astype(float) + 0.5 if is_regressor(est) else y


def _outputs(est):
    """Every fitted output of ``est`` on held-out data, as a list of arrays."""
    if isinstance(est, ABCClusterer):
        Xt, _ = make_blob_instances(4, seed=1)
        return [*est.affinity(Xt), *est.predict(Xt)]
    if isinstance(est, EigengapSpectralClustering):
        return [est.labels_, est.affinity_matrix_]
    Xt, _ = _sets(6, seed=1)
    if is_classifier(est):
        return [est.predict_proba(Xt), est.predict(Xt)]
    if is_regressor(est):
        return [est.predict(Xt)]
    out = est.transform(Xt)
    return [np.asarray(o) for o in out] if isinstance(out, list) or out.dtype == object else [out]


def _outputs_and_state(est):
    """The fitted outputs and the network's weights and buffers, by name."""
    module = vars(est).get("module_")
    state = [] if module is None else sorted(module.state_dict().items())
    curve = [np.asarray(getattr(est, "loss_curve_", []))]
    return _outputs(est) + [v.detach().cpu().numpy() for _, v in state] + curve


def _assert_same(got, expected):
    assert len(got) == len(expected)
    for u, v in zip(got, expected, strict=True):
        np.testing.assert_array_equal(u, v)


def _scramble_global_rngs(torch_seed, numpy_seed):
    torch.manual_seed(torch_seed)
    np.random.seed(numpy_seed)
    torch.rand(7)
    np.random.rand(3)


def _global_states():
    return torch.get_rng_state(), np.random.get_state()


def _assert_states_equal(got, expected, when):
    assert torch.equal(got[0], expected[0]), f"torch's global generator moved by {when}"
    for u, v in zip(got[1], expected[1], strict=True):
        assert np.array_equal(u, v), f"numpy's global generator moved by {when}"


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_fit_ignores_and_keeps_the_global_generators(est):
    """Fits under two different global torch/numpy states are bit-identical; fit and outputs leave
    both global states as they were."""
    args = _fit_args(est)
    _scramble_global_rngs(0, 0)
    expected = _outputs_and_state(clone(est).fit(*args))
    _scramble_global_rngs(123, 5)
    before = _global_states()
    fitted = clone(est).fit(*args)
    _assert_states_equal(_global_states(), before, "fit")
    got = _outputs_and_state(fitted)
    _assert_states_equal(_global_states(), before, "the fitted outputs")
    _assert_same(got, expected)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_refits_of_one_object_are_bit_identical(est):
    """Refitting one object, after a fit with another seed and back by ``set_params``, and a clone
    of the fitted object all reproduce the first fit bit for bit."""
    args = _fit_args(est)
    est = clone(est)
    expected = _outputs_and_state(est.fit(*args))
    _assert_same(_outputs_and_state(est.fit(*args)), expected)
    est.set_params(random_state=1).fit(*args)
    _assert_same(_outputs_and_state(est.set_params(random_state=0).fit(*args)), expected)
    _assert_same(_outputs_and_state(clone(est).fit(*args)), expected)


def _stream(est, chunks, between=None):
    """``est`` fed ``chunks`` by ``partial_fit``; ``between(model)`` replaces the model after the
    first chunk when given."""
    X, y = _fit_args(est)
    for i, c in enumerate(chunks):
        kw = {"classes": [0, 1]} if i == 0 and is_classifier(est) else {}
        if is_classifier(est) or is_regressor(est):
            est.partial_fit(X[c], y[c], **kw)
        else:
            est.partial_fit(X[c])
        if i == 0 and between is not None:
            est = between(est)
    return est


CHUNKS = [slice(0, 7), slice(7, 14), slice(14, 20), slice(0, 7)]


@pytest.mark.parametrize("est", STREAMING, ids=STREAMING_IDS)
def test_partial_fit_streams_ignore_and_keep_the_global_generators(est):
    """Two identical partial_fit streams under different global torch/numpy states give
    bit-identical models, and leave both global states as they were."""
    _scramble_global_rngs(0, 0)
    expected = _outputs(_stream(clone(est), CHUNKS))
    _scramble_global_rngs(77, 77)
    before = _global_states()
    model = _stream(clone(est), CHUNKS)
    _assert_states_equal(_global_states(), before, "partial_fit")
    _assert_same(_outputs(model), expected)


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
@pytest.mark.parametrize("est", STREAMING, ids=STREAMING_IDS)
def test_partial_fit_stream_continues_after_a_copy(est, how):
    """A partial_fit stream whose model is pickled or deep-copied after the first chunk ends in
    the model of the uninterrupted stream, bit for bit."""
    copier = (lambda m: pickle.loads(pickle.dumps(m))) if how == "pickle" else copy.deepcopy
    expected = _outputs(_stream(clone(est), CHUNKS))
    _assert_same(_outputs(_stream(clone(est), CHUNKS, between=copier)), expected)


@pytest.mark.parametrize("est", [e for e in ESTIMATORS if "warm_start" in e.get_params()],
                         ids=[i for e, i in zip(ESTIMATORS, IDS, strict=True)
                              if "warm_start" in e.get_params()])
def test_warm_start_after_pickle_is_the_warm_start_in_memory(est):
    """A warm-start refit of a pickled fitted model equals the warm-start refit of the model
    itself, bit for bit."""
    args = _fit_args(est)
    a = clone(est).fit(*args).set_params(warm_start=True)
    b = pickle.loads(pickle.dumps(a))
    _assert_same(_outputs_and_state(b.fit(*args)), _outputs_and_state(a.fit(*args)))


def test_abc_fitted_without_seed_predicts_the_same_labels_every_call():
    """A fitted ABCClusterer with ``random_state=None`` gives the same partitions on every predict
    call and leaves numpy's global generator as it was (predict drew its k-means seed from
    numpy's global generator at every call: adjusted Rand 0.17-0.71 between calls)."""
    rng = np.random.default_rng(0)
    X = [rng.uniform(size=(30, 2)) for _ in range(8)]  # no cluster structure: k-means unstable
    y = [rng.integers(0, 4, 30) for _ in range(8)]
    np.random.seed(0)  # the fit draws from numpy's global generator: the same model at any order
    est = ABCClusterer(hidden_size=8, n_heads=2, max_steps=4, batch_size=4, eval_every=2,
                       n_init=1, input_similarity="rbf", random_state=None).fit(X, y)
    Xt = [rng.uniform(size=(30, 2)) for _ in range(4)]
    np.random.seed(0)
    before = np.random.get_state()
    first = est.predict(Xt, n_clusters=5)
    moved = not all(np.array_equal(u, v) for u, v in zip(before, np.random.get_state(),
                                                         strict=True))
    np.random.seed(1)
    second = est.predict(Xt, n_clusters=5)
    assert not moved, "predict moved numpy's global generator"
    _assert_same(second, first)
