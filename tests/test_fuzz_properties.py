"""Metamorphic fuzzing of the estimators with hypothesis (issue 27).

For generated collections of sets, each property compares a result with the same computation on a
clean, rescaled or permuted copy, or expects a ``ValueError``/``TypeError`` naming the problem:

* **sample weights**: weights with zeros and ratios up to 1e12, times a factor of 1e-300 .. 1e300,
  give the fit of the weights themselves (every estimator that takes ``sample_weight``; 1e-4
  relative in float32, see the test);
* **permutations**: shuffling the elements within each set (and the order of the sets) leaves
  :class:`OTKEmbedding`, :class:`NystromFeatures` pooled by mean and every supervised model's
  predictions unchanged (1e-4), and the list, object-array and 3-D forms and integer dtypes give
  the same numbers;
* **rescaling**: :class:`NystromFeatures` with ``standardize=True`` fitted and applied on the data
  times 1e-20 .. 1e20 gives the features of the data itself (1e-4);
* **malformed input** (1-D, 4-D, empty sets, mixed dimensions, strings, complex, None, ragged
  lists, wrong label shapes, bad ``sample_weight``) to ``fit`` and ``predict``/``transform`` of
  every estimator: a ``ValueError``/``TypeError`` whose message names the problem;
* **clustering**: :meth:`ABCClusterer.predict`, :meth:`EigengapSpectralClustering.fit_predict` and
  :func:`estimate_n_clusters` on valid, extreme and bad input: valid labels or a clear error.

``SKSET_FUZZ_EXAMPLES`` / ``SKSET_FUZZ_RANDOM`` as in ``tests/test_fuzz.py``.
"""

import os
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

import skset
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
    estimate_n_clusters,
)

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore")
N_EXAMPLES = int(os.environ.get("SKSET_FUZZ_EXAMPLES", 2000))
FUZZ = settings(
    deadline=None,
    database=None,
    derandomize=not os.environ.get("SKSET_FUZZ_RANDOM"),
    suppress_health_check=list(HealthCheck),
)


def examples(fraction: float) -> settings:
    return settings(FUZZ, max_examples=max(int(N_EXAMPLES * fraction), 1))


NN = dict(hidden_size=8, n_layers=1, max_iter=1, batch_size=8, random_state=0, device="cpu")
OTK = dict(n_components=4, n_supports=2, max_iter=1, random_state=0, device="cpu")
ESTIMATORS = {
    "NystromFeatures": NystromFeatures(n_components=4, random_state=0, device="cpu"),
    "OTKEmbedding": OTKEmbedding(n_supports=3, n_references=2, random_state=0, device="cpu"),
    "SetTransformerClassifier": SetTransformerClassifier(n_heads=2, n_inducing=2, **NN),
    "SetTransformerRegressor": SetTransformerRegressor(n_heads=2, n_inducing=None, norm="set",
                                                       residual="clean", **NN),
    "DeepSetsClassifier": DeepSetsClassifier(pooling="max", **NN),
    "DeepSetsRegressor": DeepSetsRegressor(norm="set", residual="clean", **NN),
    "OTKClassifier": OTKClassifier(**OTK),
    "OTKRegressor": OTKRegressor(**OTK),
    "DilatedKernelFeatures": DilatedKernelFeatures(n_thresholds=3, max_dilations=2, random_state=0,
                                                   device="cpu"),
}
_FITTED = {}


def _y(name, X):
    y = np.arange(len(X)) % 2
    if "Regressor" in name:
        return y + np.array([float(x.mean()) for x in X])
    # NystromFeatures gets labels too: its "auto" element map is chosen from them
    return None if name in ("OTKEmbedding", "DilatedKernelFeatures") else y


def _out(est, X):
    if isinstance(est, NystromFeatures):  # per-element features, pooled by mean per set
        return np.stack([f.mean(0) for f in est.transform(X)])
    if isinstance(est, (OTKEmbedding, DilatedKernelFeatures)):
        return est.transform(X)
    if hasattr(est, "predict_proba"):
        return est.predict_proba(X)
    return est.predict(X)


def _fitted(name, d):
    if (name, d) not in _FITTED:
        rng = np.random.default_rng(d)
        X = [rng.normal(size=(int(n), d)) for n in rng.integers(3, 9, 8)]
        _FITTED[name, d] = clone(ESTIMATORS[name]).fit(X, _y(name, X))
    return _FITTED[name, d]


def _sets(seed, d, n_sets, low=1, high=30, scale=1.0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(int(n), d)) * scale for n in rng.integers(low, high + 1, n_sets)]


# ------------------------------------------------------------------------------- sample weights
@examples(0.01)
@given(name=st.sampled_from(sorted(ESTIMATORS)), n_sets=st.integers(4, 10),
       zeros=st.integers(0, 3), log_ratio=st.integers(0, 12),
       factor=st.sampled_from([1e-300, 1e-46, 1e-20, 1e20, 1e39, 1e300]),
       seed=st.integers(0, 2**31 - 1))
def test_fuzz_sample_weight_rescaled(name, n_sets, zeros, log_ratio, factor, seed):
    """Weights (some zero, ratios up to 10**log_ratio) times ``factor`` fit as the weights do."""
    X = _sets(seed, 2, n_sets, low=2, high=8)
    y = _y(name, X)
    rng = np.random.default_rng(seed)
    w = 10.0 ** rng.uniform(0, log_ratio, n_sets)
    # at most n_sets - 2 zeros: a fit needs 2 sets of positive weight (OTKEmbedding with 2
    # references refuses fewer, with a ValueError saying so)
    w[rng.permutation(n_sets)[:min(zeros, n_sets - 2)]] = 0.0
    w = w / w.max()  # largest weight 1, so that w * 1e300 stays finite
    if y is not None and "Classifier" in name:  # both classes keep a weighted set
        if len(np.unique(y[w > 0])) < 2:
            w[y != y[int(np.argmax(w))]] = 1.0
    est = ESTIMATORS[name]
    ref = _out(clone(est).fit(X, y, sample_weight=w), X)
    w2 = w * factor
    w2_copy = w2.copy()
    got = _out(clone(est).fit(X, y, sample_weight=w2), X)
    np.testing.assert_array_equal(w2, w2_copy)  # not modified in place
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))


# --------------------------------------------------------------------- permutations and forms
@examples(0.02)
@given(name=st.sampled_from(sorted(ESTIMATORS)), d=st.sampled_from([1, 2, 5]),
       n_sets=st.integers(1, 5), equal=st.booleans(), seed=st.integers(0, 2**31 - 1),
       log_scale=st.sampled_from([-3, 0, 0, 2]))
def test_fuzz_permutation_and_forms(name, d, n_sets, equal, seed, log_scale):
    """Permuted elements (not for a series reader), permuted sets, the 3-D / object forms and
    integer data: same outputs."""
    est = _fitted(name, d)
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(1, 25))] * n_sets if equal else rng.integers(1, 25, n_sets)
    X = [np.round(rng.normal(size=(int(n), d)) * 10.0 ** log_scale, 1) for n in sizes]
    ref = _out(est, X)
    tol = dict(rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref).max())))
    if name != "DilatedKernelFeatures":  # it reads each set's rows as a series, in order
        perm = [x[rng.permutation(len(x))] for x in X]
        np.testing.assert_allclose(_out(est, perm), ref, **tol, err_msg="within-set permutation")
    order = rng.permutation(n_sets)
    np.testing.assert_allclose(_out(est, [X[i] for i in order]), ref[order], **tol,
                               err_msg="order of the sets")
    obj = np.empty(n_sets, dtype=object)
    obj[:] = X
    np.testing.assert_allclose(_out(est, obj), ref, **tol, err_msg="object array")
    if equal:
        np.testing.assert_allclose(_out(est, np.stack(X)), ref, **tol, err_msg="3-D array")
    if log_scale >= 0:  # integer values: the same numbers as their float64 copy
        Xi = [np.round(x).astype(np.int32) for x in X]
        np.testing.assert_allclose(_out(est, Xi), _out(est, [x.astype(float) for x in Xi]),
                                   **tol, err_msg="integer dtype")


# ------------------------------------------------------------------------------------ rescaling
@examples(0.01)
@given(factor=st.sampled_from([1e-20, 1e-10, 1e-3, 1e3, 1e10, 1e20]),
       d=st.sampled_from([1, 2, 4]), n_sets=st.integers(2, 6),
       offset=st.sampled_from([0.0, 5.0]), dtype=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2**31 - 1))
def test_fuzz_nystrom_standardize_rescaling(factor, d, n_sets, offset, dtype, seed):
    """``standardize=True``: the features of ``c (X + offset)`` (fit and transform) are those of
    ``X + offset``, for c from 1e-20 to 1e20 in float64 (1e-10) and in float32 (1e-4: rounding of
    the standardised data) up to the documented float32 limit: data beyond 1e15 in magnitude are
    refused with a ValueError saying they are too large for float32 (the standardisation is not
    applied before that check)."""
    X = [x + offset for x in _sets(seed, d, n_sets, low=3, high=20)]
    est = NystromFeatures(n_components=4, standardize=True, normalize=False, bandwidth=0.5,
                          random_state=0, device="cpu", dtype=dtype)
    ref = np.concatenate(clone(est).fit(X).transform(X))
    Xc = [x * factor for x in X]
    if dtype == "float32" and max(np.abs(x).max() for x in Xc) > 1e15:
        with pytest.raises(ValueError, match="too large for float32"):
            clone(est).fit(Xc)
        return
    got = np.concatenate(clone(est).fit(Xc).transform(Xc))
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


@examples(0.005)
@given(log_factor=st.one_of(st.just(-13), st.integers(-30, 30)), d=st.integers(1, 4),
       n_sets=st.integers(10, 24), shift=st.floats(0.0, 2.0),
       preset=st.sampled_from(["auto", "sphere", "raw"]), seed=st.integers(0, 2**31 - 1))
def test_fuzz_nystrom_auto_map_is_scale_free(log_factor, d, n_sets, shift, preset, seed):
    """NystromFeatures in float64 with labels: the data times 10**k (k in -30..30) gives the
    same element map (the "auto" choice, the anchors' number) and the same features to 1e-8:
    every threshold on raw elements is relative to their scale."""
    rng = np.random.default_rng(seed)
    y = np.arange(n_sets) % 2
    X = [rng.normal(loc=shift * c, size=(int(rng.integers(2, 8)), d)) for c in y]
    kw = {"auto": {}, "sphere": dict(standardize=False, normalize=True, keep_norm=False),
          "raw": dict(standardize=False, normalize="auto")}[preset]
    make = dict(n_components=6, random_state=0, dtype="float64", device="cpu", **kw)
    ref = NystromFeatures(**make).fit(X, y)
    Xs = [x * 10.0**log_factor for x in X]
    got = NystromFeatures(**make).fit(Xs, y)
    for name in ("standardize_", "normalize_", "keep_norm_", "relative_bandwidth_",
                 "n_components_"):
        assert getattr(got, name) == getattr(ref, name), name
    np.testing.assert_allclose(np.concatenate(got.transform(Xs)),
                               np.concatenate(ref.transform(X)), rtol=1e-8, atol=1e-8)


# ------------------------------------------------------------------------------ malformed input
def _malformed(kind, d, rng):
    """``(X, keywords)``: a malformed collection and what its error may name."""
    good = [rng.normal(size=(int(n), d)) for n in rng.integers(2, 6, 3)]
    if kind == "1-D":
        return rng.normal(size=5), ["1-D", "2-D", "dimension", "shape", "set"]
    if kind == "4-D":
        return rng.normal(size=(2, 3, 2, d)), ["4", "dimension", "shape", "set"]
    if kind == "empty-set":
        return [good[0], np.zeros((0, d))], ["empty", "no element", "0 element", "set 1"]
    if kind == "mixed-dims":
        return [good[0], rng.normal(size=(3, d + 1))], ["features"]
    if kind == "wrong-d":
        return [rng.normal(size=(3, d + 2))], ["features"]
    if kind == "empty-list":
        return [], ["empty", "no set", "0 sets", "at least"]
    if kind == "none":
        return None, ["None", "X", "set"]
    if kind == "string":
        return "abc", ["str", "X", "set"]
    if kind == "strings":
        return [np.array([["a"] * d, ["b"] * d])], ["numeric", "str", "float", "dtype", "set 0"]
    if kind == "complex":
        return [good[0].astype(complex)], ["complex", "real", "dtype"]
    if kind == "ragged":
        return [[[1.0] * d, [2.0] * (d + 1)]], ["shape", "ragged", "inhomogeneous", "set 0",
                                                "sequence"]
    if kind == "nan-set":
        bad = [x.copy() for x in good]
        bad[-1][rng.integers(len(bad[-1])), rng.integers(d)] = np.nan
        return bad, ["NaN"]
    raise AssertionError(kind)  # pragma: no cover


MALFORMED = ["1-D", "4-D", "empty-set", "mixed-dims", "wrong-d", "empty-list", "none",
             "string", "strings", "complex", "ragged", "nan-set"]
BAD_LABELS = ["y-short", "y-2d-classifier", "y-nan", "y-inf", "y-scalar", "y-mixed",
              "w-short", "w-nan", "w-negative", "w-2d", "w-all-zero", "w-string",
              "cw-unknown-class", "cw-zero", "cw-length", "cw-string", "cw-nan"]
#: a bad class_weight of each kind (the set classifiers)
BAD_CLASS_WEIGHTS = {"cw-unknown-class": {7: 2.0}, "cw-zero": {0: 0.0}, "cw-length": [1.0] * 3,
                     "cw-string": "heavy", "cw-nan": [1.0, np.nan]}


def _assert_clear(exc, keywords, what):
    assert any(k.lower() in str(exc).lower() for k in keywords), (
        f"{what}: the message names none of {keywords}: {exc!r}")


@examples(0.05)
@given(name=st.sampled_from(sorted(ESTIMATORS)), kind=st.sampled_from(MALFORMED + BAD_LABELS),
       where=st.sampled_from(["fit", "predict"]), d=st.sampled_from([1, 2, 5]),
       seed=st.integers(0, 2**31 - 1))
def test_fuzz_malformed_input(name, kind, where, d, seed):
    """Malformed collections, labels and weights: ValueError/TypeError naming the problem."""
    rng = np.random.default_rng(seed)
    if kind in BAD_LABELS:
        X = [rng.normal(size=(int(n), d)) for n in rng.integers(2, 6, 6)]
        y = _y(name, X)
        if y is None and kind.startswith("y"):
            return  # unsupervised: y is ignored
        w, keywords = None, ["sample_weight"]
        if kind == "y-short":
            y, keywords = y[:-1], ["y", "sets", "samples", "inconsistent", "length"]
        elif kind == "y-2d-classifier":
            if "Regressor" in name or name == "NystromFeatures":
                # multi-output regression is valid; NystromFeatures takes any y a Pipeline's
                # final step takes (multi-output, multi-label) and chooses nothing from it
                return
            # two columns of 0 .. 3: multiclass-multioutput, which no classifier takes (a 0/1
            # indicator matrix is multi-label, valid for the neural-network classifiers)
            y, keywords = np.stack([y, y + 2], 1), ["y", "1-D", "1d", "shape", "multi"]
        elif kind in ("y-nan", "y-inf"):
            y = y.astype(float)
            y[0] = np.nan if kind == "y-nan" else -np.inf
            keywords = ["NaN", "infinity", "finite"]
        elif kind == "y-scalar":
            y, keywords = np.asarray(y[0]), ["y is a scalar"]
        elif kind == "y-mixed":  # strings mixed with numbers: cannot be sorted into classes
            y = np.array(["a"] + list(y[1:]), dtype=object)
            keywords = ["y mixes label types", "numeric targets"]
        elif kind.startswith("cw-"):
            if "Classifier" not in name:
                return  # class_weight is a parameter of the set classifiers only
            est = clone(ESTIMATORS[name]).set_params(class_weight=BAD_CLASS_WEIGHTS[kind])
            with pytest.raises((ValueError, TypeError)) as info:
                est.fit(X, y)
            _assert_clear(info.value, ["class_weight"], f"{name}.fit({kind})")
            return
        elif kind == "w-short":
            w = np.ones(len(X) - 1)
        elif kind == "w-nan":
            w = np.ones(len(X))
            w[1] = np.nan
        elif kind == "w-negative":
            w = np.ones(len(X))
            w[1] = -1
        elif kind == "w-2d":
            w = np.ones((len(X), 2))
        elif kind == "w-all-zero":
            w = np.zeros(len(X))
        elif kind == "w-string":
            w = np.array(["a"] * len(X))
        with pytest.raises((ValueError, TypeError)) as info:
            clone(ESTIMATORS[name]).fit(X, y, sample_weight=w)
        _assert_clear(info.value, keywords, f"{name}.fit({kind})")
        return
    X, keywords = _malformed(kind, d, rng)
    try:
        if where == "fit":
            if kind == "wrong-d":
                return  # a valid training collection
            n = len(X) if isinstance(X, (list, np.ndarray)) and (isinstance(X, list) or X.ndim > 0) else 2
            y = _y(name, [np.zeros((1, 1))] * n)
            est = clone(ESTIMATORS[name]).fit(X, y)
        else:
            est = _fitted(name, d)
            _out(est, X)
    except NotFittedError:  # pragma: no cover
        raise
    except (ValueError, TypeError) as exc:
        _assert_clear(exc, keywords + ["X", "set"] if kind in ("none", "string") else keywords,
                      f"{name}.{where}({kind})")
        return
    raise AssertionError(f"{name}.{where} accepted {kind} input")


def test_not_fitted():
    """``predict``/``transform`` before ``fit``: scikit-learn's NotFittedError, on any input."""
    for est in ESTIMATORS.values():
        with pytest.raises(NotFittedError):
            _out(clone(est), [np.zeros((2, 2))])
    with pytest.raises(NotFittedError):
        ABCClusterer().predict([np.zeros((2, 2))])


# ----------------------------------------------------------------------------------- clustering
_ABC = {}


def _abc():
    if "m" not in _ABC:
        rng = np.random.default_rng(0)
        X, y = [], []
        for _ in range(6):
            lab = np.repeat([0, 1], 5)
            X.append(rng.normal(size=(10, 2)) + 4 * lab[:, None])
            y.append(lab)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _ABC["m"] = ABCClusterer(hidden_size=8, n_heads=2, max_steps=2, batch_size=4,
                                     eval_every=2, input_similarity=None,
                                     random_state=0).fit(X, y)
    return _ABC["m"]


def _valid_labels(lab, n, k=None):
    assert lab.shape == (n,) and lab.dtype.kind in "iu"
    assert set(np.unique(lab)) == set(range(lab.max() + 1))
    if k is not None:
        assert lab.max() < k


@examples(0.02)
@given(kind=st.sampled_from([None] * 6 + MALFORMED),
       n_clusters=st.sampled_from([None, None, 1, 2, 3, np.int64(2), "list", 0, -1, 2.5, True,
                                   "2"]),
       log_scale=st.sampled_from([-30, -3, 0, 3, 30]), dtype=st.sampled_from(["float32",
                                                                              "float64", "int32"]),
       seed=st.integers(0, 2**31 - 1))
def test_fuzz_abc_predict(kind, n_clusters, log_scale, dtype, seed):
    abc = _abc()
    rng = np.random.default_rng(seed)
    if kind is None:
        X = [(rng.normal(size=(int(n), 2)) * 10.0 ** log_scale).astype(dtype)
             for n in rng.integers(1, 20, int(rng.integers(1, 4)))]
        keywords = ["n_clusters"]
    else:
        X, keywords = _malformed(kind, 2, rng)
        keywords = keywords + ["n_clusters"]
    bad_k = not (n_clusters is None or n_clusters == "list"
                 or (isinstance(n_clusters, (int, np.integer)) and not isinstance(n_clusters, bool)
                     and n_clusters >= 1))
    if n_clusters == "list":
        n_clusters = [2] * (len(X) if isinstance(X, list) else 1)
    try:
        labels = abc.predict(X, n_clusters=n_clusters)
    except (ValueError, TypeError) as exc:
        assert kind is not None or bad_k or "too large" in str(exc), f"valid input refused: {exc!r}"
        _assert_clear(exc, keywords + (["X", "set"] if kind in ("none", "string") else []),
                      f"ABCClusterer.predict({kind}, n_clusters={n_clusters!r})")
        return
    assert kind is None and not bad_k, f"accepted {kind}, n_clusters={n_clusters!r}"
    for lab, x in zip(labels, X, strict=True):
        _valid_labels(lab, len(x))


@examples(0.02)
@given(n=st.integers(1, 40), d=st.integers(1, 4), log_scale=st.sampled_from([-30, -3, 0, 3, 30]),
       problem=st.sampled_from([None] * 5 + ["nan", "inf", "1-D", "3-D", "empty", "string"]),
       n_clusters=st.sampled_from([None, None, 2, 3, 0, 2.5]),
       affinity=st.sampled_from(["rbf", "nearest_neighbors", "precomputed"]),
       seed=st.integers(0, 2**31 - 1))
def test_fuzz_eigengap_spectral(n, d, log_scale, problem, n_clusters, affinity, seed):
    """EigengapSpectralClustering.fit_predict and estimate_n_clusters: labels or a clear error."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 10.0 ** log_scale
    if affinity == "precomputed":
        X = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / (2 * X.var() + 1e-300))
    keywords = {"nan": ["NaN"], "inf": ["infinity", "NaN"], "1-D": ["1D", "2D", "1-D", "2-D"],
                "3-D": ["3", "dim"], "empty": ["0 sample", "minimum", "empty"],
                "string": ["str", "float", "numeric", "convert"]}.get(problem, [])
    if problem in ("nan", "inf"):
        X[rng.integers(n), rng.integers(X.shape[1])] = np.nan if problem == "nan" else np.inf
    elif problem == "1-D":
        X = X[:, 0]
    elif problem == "3-D":
        X = X[None]
    elif problem == "empty":
        X = X[:0]
    elif problem == "string":
        X = X.astype(str).astype(object)
        X[0, 0] = "abc"
    bad_k = n_clusters is not None and not (isinstance(n_clusters, int) and n_clusters >= 1)
    too_many = isinstance(n_clusters, int) and n_clusters > n
    keywords = keywords + (["n_clusters"] if bad_k or too_many else [])
    if affinity == "precomputed":
        keywords += ["affinity", "square", "symmetric"]
    est = EigengapSpectralClustering(n_clusters=n_clusters, affinity=affinity, random_state=0,
                                     n_init=1)
    try:
        labels = est.fit_predict(X)
    except (ValueError, TypeError) as exc:
        assert problem is not None or bad_k or too_many, f"valid input refused: {exc!r}"
        _assert_clear(exc, keywords, f"EigengapSpectralClustering({problem}, {affinity})")
        return
    assert problem is None and not bad_k and not too_many, f"accepted {problem}, {n_clusters}"
    _valid_labels(labels, n)
    if affinity != "precomputed" or problem is not None:
        return
    try:
        k = estimate_n_clusters(X)
    except (ValueError, TypeError) as exc:  # pragma: no cover
        raise AssertionError(f"estimate_n_clusters refused a valid affinity: {exc!r}") from exc
    assert 1 <= k <= n
    for bad, word in ((X[:, :-1], "square"), (-X, "negative"), (X * np.nan, "NaN")):
        if bad.size == 0:
            continue
        with pytest.raises((ValueError, TypeError)) as info:
            estimate_n_clusters(bad)
        assert word.lower() in str(info.value).lower() or "affinity" in str(info.value), (
            repr(info.value))


def test_every_public_function_is_fuzzed():
    """Every public function of skset is fuzzed somewhere (or said why not)."""
    fuzzed = {"sets_from_frame", "frame_from_sets",  # test_fuzz_frames.py
              "estimate_n_clusters"}
    # save/load/export_onnx serialise a fitted model; their inputs are a model and a path
    # (tests/test_persist.py, tests/test_export.py, test_bad_input_engine.py defect 1)
    not_data = {"save", "load", "export_onnx",
                # the process-wide settings take no data (tests/test_compiled.py checks them)
                "set_config", "get_config", "config_context"}
    public = {n for n in skset.__all__ if callable(getattr(skset, n))
              and not isinstance(getattr(skset, n), type)}
    assert public <= fuzzed | not_data, sorted(public - fuzzed - not_data)
