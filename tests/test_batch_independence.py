"""Batch independence: a set's output does not depend on the other sets of the call.

For every public estimator (float32 and, where it has a ``dtype`` parameter, float64 variants,
with and without k-mers) and every per-set output method (``transform``, ``predict``,
``predict_proba``, ``decision_function``, ``predict_log_proba``; ``affinity`` and ``predict`` of
:class:`ABCClusterer`; ``attention_weights``, ``transport_plan``): each set computed alone
equals its row of one call on sets of 1 to 40 elements in shuffled order, also when the batch
budget (``max_elements``, ``max_pairs``) cuts the call into many batches; the rows follow the
input order; no call modifies the input list or its arrays; element masses are read per set.

What other files already check (not repeated here): ``test_common.py`` compares sets of 3-9
elements alone with the same sets beside one 40-element set (the main output of each estimator,
float32, default budget), and that ``fit`` plus that output leave the inputs unmodified;
``test_neural_network.py`` and ``test_supervised_otk.py`` do the same for ``predict_proba`` /
``predict`` (and one ``transform``); ``test_embedding.py`` checks :class:`OTKEmbedding` alone,
in a batch and with ``max_elements=5``; ``test_dilated_kernels.py`` does so for
:class:`DilatedKernelFeatures` (``max_elements=50``); ``test_fast_paths.py`` chunks
:class:`NystromFeatures` without k-mers; ``test_window_auto.py`` compares a short set in a batch
with its padded copy alone; ``test_cluster.py`` splits, reverses and chunks
:meth:`ABCClusterer.predict`; ``test_fuzz_properties.py`` permutes the order of the sets.
"""

import copy
import warnings

import numpy as np
import pytest
from conftest import make_blob_instances
from sklearn.base import clone, is_regressor
from sklearn.exceptions import ConvergenceWarning

from skset import (
    ABCClusterer,
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
from skset._sets import length_batches

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

F64 = dict(dtype="float64")
NN = dict(hidden_size=8, n_layers=1, max_iter=2, batch_size=8, early_stopping=False,
          random_state=0)  # no validation split: no output shrinkage to a constant
OTKS = dict(n_components=6, n_supports=3, max_iter=2, random_state=0)
ST = dict(n_heads=2, n_inducing=3)
#: name -> unfitted estimator; the float64 ones are compared to 1e-10, the others to 1e-5
CASES = {
    "nystrom": NystromFeatures(n_components=6, window=1, random_state=0),
    "nystrom-f64": NystromFeatures(n_components=6, window=1, random_state=0, **F64),
    "nystrom-kmers": NystromFeatures(n_components=6, window=3, random_state=0),
    "nystrom-kmers-f64": NystromFeatures(n_components=6, window=3, random_state=0, **F64),
    "nystrom-kmers-plain": NystromFeatures(n_components=6, window=3, kmer_coding="plain",
                                           random_state=0),
    "nystrom-auto": NystromFeatures(n_components=6, window="auto", random_state=0),
    "otk-embedding": OTKEmbedding(n_supports=3, n_references=2, random_state=0),
    "otk-embedding-f64": OTKEmbedding(n_supports=3, position_sigma=0.5, reg_m=1.0,
                                      random_state=0, **F64),
    "st-classifier": SetTransformerClassifier(window=1, **ST, **NN),
    "st-classifier-f64": SetTransformerClassifier(n_heads=2, n_inducing=None, norm="set",
                                                  n_seeds=2, decoder="sab", pooled_skip=True,
                                                  window=3, **NN, **F64),
    "st-regressor": SetTransformerRegressor(window=3, **ST, **NN),
    "st-regressor-f64": SetTransformerRegressor(window=1, **ST, **NN, **F64),
    "ds-classifier": DeepSetsClassifier(pooling="max", window=1, **NN),
    "ds-classifier-f64": DeepSetsClassifier(window=3, **NN, **F64),
    "ds-regressor": DeepSetsRegressor(pooling="sum", pooled_skip=True, window=3, **NN),
    "ds-regressor-f64": DeepSetsRegressor(pooling="scaled_mean", norm="set", residual="clean",
                                          window=3, **NN, **F64),
    "otk-classifier": OTKClassifier(**OTKS),
    "otk-classifier-f64": OTKClassifier(window=3, position_sigma=0.5, **OTKS, **F64),
    "otk-regressor": OTKRegressor(**OTKS),
    "otk-regressor-f64": OTKRegressor(window=3, reg_m=1.0, **OTKS, **F64),
    "dilated": DilatedKernelFeatures(n_thresholds=3, max_dilations=2, random_state=0),
    "dilated-f64": DilatedKernelFeatures(n_thresholds=3, max_dilations=2, random_state=0, **F64),
}
METHODS = ("transform", "predict", "predict_proba", "decision_function", "predict_log_proba")
#: a budget far below the longest set (40 elements): the calls below are cut into many batches
SMALL_BUDGET = 8
_FITTED = {}


def _train(offset=0.0):
    """24 ordered series of 6-19 two-channel steps whose class is their frequency."""
    rng = np.random.default_rng(0)
    X = []
    for i in range(24):
        t = np.arange(int(rng.integers(6, 20)))[:, None]
        X.append(offset + np.sin(t * (0.5 + 0.5 * (i % 2))) + 0.1 * rng.normal(size=(len(t), 2)))
    return X, np.arange(24) % 2


def _sets(seed=5, n_sets=12, offset=0.0):
    """Sets of 1, 2, 40 and random sizes up to 40 elements, in shuffled order."""
    rng = np.random.default_rng(seed)
    sizes = np.r_[1, 2, 40, rng.integers(1, 41, n_sets - 3)]
    rng.shuffle(sizes)
    return [offset + rng.normal(size=(int(n), 2)) for n in sizes]


def _fitted(name, offset=0.0):
    if (name, offset) not in _FITTED:
        est = CASES[name]
        X, y = _train(offset)
        y = y + 0.5 if is_regressor(est) else y
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            _FITTED[name, offset] = clone(est).fit(X, y)
    return _FITTED[name, offset]


def _methods(est):
    return [m for m in METHODS if hasattr(est, m)]


def _rows(est, method, X, **kw):
    """The output of ``method`` on ``X``: one array per set."""
    out = getattr(est, method)(X, **kw)
    return [np.asarray(r) for r in out]


def _assert_rows(got, expected, est, what):
    """Row by row: labels exactly, numbers to 1e-10 (float64 models) or 1e-5 (float32)."""
    assert len(got) == len(expected), what
    tol = 1e-10 if getattr(est, "dtype", "float32") == "float64" else 1e-5
    scale = max(1.0, max(float(np.abs(e).max()) for e in expected if np.size(e)))
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if e.dtype.kind in "iub" or e.dtype == object:
            np.testing.assert_array_equal(g, e, err_msg=f"{what}, set {i}")
        else:
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol * scale, err_msg=f"{what}, set {i}")


# ------------------------------------------------------------------------ alone == in one call
@pytest.mark.parametrize("name", CASES)
def test_each_set_alone_equals_its_row_in_one_call(name):
    """Every output method: each set alone equals its row of one call on sets of 1 to 40."""
    est = _fitted(name)
    X = _sets()
    for method in _methods(est):
        alone = [_rows(est, method, [x])[0] for x in X]
        if method != "predict" or is_regressor(est):  # outputs that differ between sets
            assert len({np.asarray(a, float).tobytes() for a in alone}) > 1, method
        _assert_rows(_rows(est, method, X), alone, est, f"{name}.{method}")


@pytest.mark.parametrize("name", CASES)
def test_small_batch_budget_gives_the_rows_of_one_batch(name):
    """``max_elements`` far below the longest set: the rows of the default budget."""
    est = _fitted(name)
    X = _sets()
    assert len(length_batches([len(x) for x in X], max_elements=SMALL_BUDGET)) >= 6
    small = copy.deepcopy(est).set_params(max_elements=SMALL_BUDGET)
    for method in _methods(est):
        _assert_rows(_rows(small, method, X), _rows(est, method, X), est, f"{name}.{method}")


@pytest.mark.parametrize("name", CASES)
def test_rows_follow_the_input_order(name):
    """The reversed input gives the reversed rows, with the default and a small budget."""
    est = _fitted(name)
    X = _sets(seed=6)
    for budget in (None, SMALL_BUDGET):
        model = est if budget is None else copy.deepcopy(est).set_params(max_elements=budget)
        for method in _methods(est):
            ref = _rows(model, method, X)
            _assert_rows(_rows(model, method, X[::-1])[::-1], ref, est,
                         f"{name}.{method}, budget {budget}")


@pytest.mark.parametrize("name", CASES)
def test_calls_leave_the_input_list_and_arrays_unmodified(name):
    """No output method writes into its input: float32 and float64 sets, one array twice,
    read-only and strided arrays, each set alone and all in one call."""
    est = _fitted(name)
    rng = np.random.default_rng(7)
    base = _sets(seed=7)
    X = [x.astype(np.float32) if i % 2 else x for i, x in enumerate(base)]
    X.append(X[0])  # the same array twice in one call
    X.append(np.repeat(base[3], 2, axis=0)[::2])  # a strided view
    frozen = rng.normal(size=(5, 2))
    frozen.setflags(write=False)
    X.append(frozen)
    ids = [id(x) for x in X]
    snapshot = copy.deepcopy(X)
    for method in _methods(est):
        getattr(est, method)(X)
        for x in X:
            getattr(est, method)([x])
    assert [id(x) for x in X] == ids and len(X) == len(snapshot)
    for i, (x, s) in enumerate(zip(X, snapshot, strict=True)):
        assert x.dtype == s.dtype and x.shape == s.shape, f"set {i}"
        np.testing.assert_array_equal(x, s, err_msg=f"set {i} was modified")
    assert not frozen.flags.writeable


# ----------------------------------------------------------------------------- k-mers of short sets
@pytest.mark.parametrize("name", ["nystrom-kmers", "nystrom-kmers-f64", "nystrom-kmers-plain",
                                  "nystrom-auto"])
def test_kmers_of_sets_shorter_than_the_window_read_alone_as_in_a_batch(name):
    """NystromFeatures with k-mers (window=3, and "auto" on ordered series): sets of 1 and 2
    elements give one k-mer, the same alone as in a batch of long sets, at any budget."""
    est = _fitted(name)
    assert est.window_ > 1, "the ordered training series should give k-mers"
    rng = np.random.default_rng(8)
    short = [rng.normal(size=(1, 2)), rng.normal(size=(2, 2))]
    X = [rng.normal(size=(40, 2)), short[0], rng.normal(size=(17, 2)), short[1],
         rng.normal(size=(3, 2))]
    alone = [est.transform([s])[0] for s in short]
    assert all(a.shape == (1, est.n_components_) for a in alone)
    for budget in (est.max_elements, 1):
        model = copy.deepcopy(est).set_params(max_elements=budget)
        out = model.transform(X)
        _assert_rows([out[1], out[3]], alone, est, f"{name}, max_elements={budget}")


# ---------------------------------------------------------------------------------- element masses
@pytest.mark.parametrize("name", ["otk-embedding", "otk-embedding-f64", "otk-classifier",
                                  "otk-regressor-f64"])
def test_element_weight_is_read_per_set(name):
    """``element_weight``: each set with its masses alone equals its row of one call, at a small
    budget and in reverse order; the masses are not modified."""
    est = _fitted(name)
    X = _sets(seed=9)
    rng = np.random.default_rng(9)
    w = [rng.uniform(0.1, 2.0, len(x)) for x in X]
    w_copy = copy.deepcopy(w)
    small = copy.deepcopy(est).set_params(max_elements=SMALL_BUDGET)
    for method in _methods(est):
        ref = _rows(est, method, X, element_weight=w)
        alone = [_rows(est, method, [x], element_weight=[m])[0] for x, m in zip(X, w, strict=True)]
        _assert_rows(ref, alone, est, f"{name}.{method} alone")
        _assert_rows(_rows(small, method, X, element_weight=w), ref, est, f"{name}.{method} small")
        rev = _rows(est, method, X[::-1], element_weight=w[::-1])[::-1]
        _assert_rows(rev, ref, est, f"{name}.{method} reversed")
    for a, b in zip(w, w_copy, strict=True):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------ other per-set outputs
def test_attention_weights_and_transport_plans_are_read_per_set():
    """SetTransformer ``attention_weights`` and OTKEmbedding ``transport_plan``: each set alone
    equals its entry of one call, at the default and a small budget."""
    X = _sets(seed=10)
    for name in ("st-classifier", "st-classifier-f64"):
        est = _fitted(name)
        small = copy.deepcopy(est).set_params(max_elements=SMALL_BUDGET)
        whole, cut = est.attention_weights(X), small.attention_weights(X)
        for i, x in enumerate(X):
            alone = est.attention_weights([x])[0]
            assert alone.keys() == whole[i].keys() == cut[i].keys()
            for key in alone:
                _assert_rows([whole[i][key], cut[i][key]], [alone[key]] * 2, est,
                             f"{name} set {i} {key}")
    for name in ("otk-embedding", "otk-embedding-f64"):
        est = _fitted(name)
        small = copy.deepcopy(est).set_params(max_elements=SMALL_BUDGET)
        alone = [est.transport_plan([x])[0] for x in X]
        _assert_rows(est.transport_plan(X), alone, est, name)
        _assert_rows(small.transport_plan(X), alone, est, f"{name} small budget")
        _assert_rows(est.transport_plan(X[::-1])[::-1], alone, est, f"{name} reversed")


def test_abc_affinity_and_labels_alone_small_budget_and_reversed():
    """ABCClusterer ``affinity`` and ``predict``: each instance (1 to 40 elements) alone equals
    its entry of one call, cut by ``max_pairs`` into many chunks, and in reverse order; the
    inputs are not modified."""
    abc = ABCClusterer(hidden_size=8, n_heads=2, max_steps=4, batch_size=4, eval_every=2,
                       input_similarity=None, random_state=0).fit(*make_blob_instances())
    rng = np.random.default_rng(11)
    X = [rng.normal(size=(int(n), 3)) for n in (7, 1, 40, 2, 19, 3, 33, 12)]
    X_copy = copy.deepcopy(X)
    small = copy.deepcopy(abc).set_params(max_pairs=100)
    A, labels = abc.affinity(X), abc.predict(X)
    alone_A = [abc.affinity([x])[0] for x in X]
    alone_labels = [abc.predict([x])[0] for x in X]
    for got in (A, small.affinity(X), abc.affinity(X[::-1])[::-1]):
        for a, b in zip(got, alone_A, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for got in (labels, small.predict(X), abc.predict(X[::-1])[::-1]):
        for a, b in zip(got, alone_labels, strict=True):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(X, X_copy, strict=True):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------- mixed input dtypes
# skset._sets.check_sets gives a call's sets one dtype, the widest among them: the numpy steps
# before the cast to the model's dtype (level + shape k-mer coding, the networks' standardisation)
# must not read a float32 set otherwise alone than beside a float64 set. Both did (the coding ran
# in the call's dtype, the standardisation returned it): 1e-8 apart in float64 models, 3e-2
# (relative) in float32 models on data at 1e4.


@pytest.mark.parametrize("name", CASES)
def test_a_float32_set_reads_the_same_beside_float64_sets(name):
    """A call mixing float32 and float64 sets: each set alone equals its row of the call."""
    est = _fitted(name)
    X = [x.astype(np.float32) if i % 3 == 0 else x for i, x in enumerate(_sets(seed=12))]
    for method in _methods(est):
        alone = [_rows(est, method, [x])[0] for x in X]
        _assert_rows(_rows(est, method, X), alone, est, f"{name}.{method}")


@pytest.mark.parametrize("name", ["nystrom-kmers", "ds-regressor"])
def test_a_float32_set_far_from_zero_reads_the_same_beside_float64_sets(name):
    """Data at 1e4 (float32 keeps ~1e-3 of a k-mer's shape): a float32 set alone equals its row
    beside a float64 set (float32 models too: they code k-mers before casting)."""
    est = _fitted(name, offset=1e4)
    rng = np.random.default_rng(13)
    X = [1e4 + rng.normal(size=(n, 2)) for n in (9, 30, 4)]
    X[0] = X[0].astype(np.float32)
    for method in _methods(est):
        alone = _rows(est, method, [X[0]])
        _assert_rows(_rows(est, method, X)[:1], alone, est, f"{name}.{method}")
