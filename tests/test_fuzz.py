"""Fuzzing the public estimators with hypothesis: random collections of sets.

Collections of 1-4 sets of 1-200 elements with 1-64 features, in float32/float64/integer dtypes,
with values from 1e-30 to 1e30 (and constant or zero sets), NaN/inf injected into some. Every
estimator is fitted once per number of features (tiny budgets, cached for the module) and its
outputs are fuzzed: the only errors allowed are clear ``ValueError``/``TypeError`` (NaN/inf must give
one that says so; values beyond 1e15 in float32 may be refused as too large), and every output is
finite. ``epsilon`` (1e-3..10) is fuzzed on :class:`OTKEmbedding` instances fitted with it and
on :func:`skset.ot.sinkhorn` directly. All estimators share each example (so each sees
``N_EXAMPLES`` of them) to keep the file fast.

The example database is off and generation is derandomised, so the suite is reproducible; set
``SKSET_FUZZ_EXAMPLES`` (and ``SKSET_FUZZ_RANDOM=1``) for a longer, randomised run.
"""

import os
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
from skset.ot import sinkhorn

# On a GPU every tiny fit pays kernel launches and synchronisations: 2,000 examples per estimator
# took over the 150 s test limit on an H200 (fuzz test alone), so a GPU run draws a fifth of them.
N_EXAMPLES = int(os.environ.get("SKSET_FUZZ_EXAMPLES", 400 if torch.cuda.is_available() else 2000))
FUZZ = settings(
    max_examples=N_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=not os.environ.get("SKSET_FUZZ_RANDOM"),
    suppress_health_check=list(HealthCheck),
)

NN = dict(hidden_size=8, n_layers=1, max_iter=1, batch_size=8, random_state=0)
FACTORIES = {
    "NystromFeatures": lambda: NystromFeatures(n_components=4, random_state=0),
    # labels read as real targets (target_type, checked in every fit)
    "NystromFeatures-continuous": lambda: NystromFeatures(n_components=4, target_type="continuous",
                                                          random_state=0),
    # several channels: each kernel's random subset of them
    "DilatedKernelFeatures": lambda: DilatedKernelFeatures(n_thresholds=3, max_dilations=3,
                                                           random_state=0),
    # dilated k-mers: sets of any size, shorter than the span (3) included, have one k-mer; the
    # anchors learnt from a sample of 8 k-mers (max_samples)
    "NystromFeatures-dilated": lambda: NystromFeatures(n_components=4, window=2, dilation=2,
                                                       max_samples=8, random_state=0),
    # a lower Sinkhorn cap than the default 3000: epsilon is fuzzed down to 1e-3 on raw data of any
    # scale, where the log domain would run the whole cap on every example (robustness is what is
    # fuzzed here; convergence is tested in test_embedding.py)
    "OTKEmbedding": lambda: OTKEmbedding(n_supports=3, sinkhorn_iter=100, random_state=0),
    "OTKEmbedding-q2-pos": lambda: OTKEmbedding(n_supports=2, n_references=2, position_sigma=0.5,
                                                sinkhorn_iter=100, random_state=0),
    "SetTransformerClassifier": lambda: SetTransformerClassifier(n_heads=2, n_inducing=2, **NN),
    # the clean-path blocks with dropout in training
    "SetTransformerRegressor": lambda: SetTransformerRegressor(
        n_heads=2, n_inducing=None, norm="set", residual="clean", n_iter_no_change="auto",
        dropout=0.1, **NN),
    # the "auto" batch size and patience (n_iter_no_change="auto" is this one's default)
    "DeepSetsClassifier": lambda: DeepSetsClassifier(pooling="max", **{**NN, "batch_size": "auto"}),
    # a set network reading dilated k-mers
    "SetTransformerClassifier-kmers": lambda: SetTransformerClassifier(
        n_heads=2, n_inducing=2, window=2, dilation=2, **NN),
    # the pooled skip (its first fit on the pooled elements) and the sized mean (the scaled mean,
    # its size fitted from the training sets, weighted, and the set's size) as options
    "DeepSetsRegressor": lambda: DeepSetsRegressor(norm="set", residual="clean", pooled_skip=True,
                                                   pooling="sized_mean", **NN),
    # each set read by its own scale (standardize="auto" on training sets six decades apart)
    "DeepSetsClassifier-set-scale": lambda: DeepSetsClassifier(**NN),
    "OTKClassifier": lambda: OTKClassifier(n_components=4, n_supports=2, max_iter=1,
                                           window="auto", kmer_coding="level_shape",
                                           epsilon="auto", alpha="auto", random_state=0),
    "OTKRegressor": lambda: OTKRegressor(n_components=None, n_supports=2, max_iter=1,
                                         position_sigma="auto", random_state=0),
}
_CACHE = {}

SCALES = [0.0, 1e-30, 1e-10, 1e-3, 1.0, 1e3, 1e10, 1e30]
DTYPES = ["float32", "float64", "int8", "int32", "int64"]
# numbers of features: a menu spanning 1..64 (each needs its own fitted estimators)
DIMS = [1, 2, 3, 5, 8, 16, 31, 64]


def training_data(name: str, d: int):
    """The tiny training sets of ``name`` with ``d`` features, and their targets."""
    rng = np.random.default_rng(d)
    n_sets = 12 if name.endswith("-set-scale") else 6
    X = [rng.normal(size=(int(n), d)) for n in rng.integers(3, 9, n_sets)]
    if name.endswith("-set-scale"):
        X = [x * 10.0 ** k for x, k in zip(X, np.linspace(-3, 3, n_sets), strict=True)]
    y = np.arange(n_sets) % 2
    return X, y.astype(float) + 0.5 if "Regressor" in name else y


def fitted(name: str, d: int, **params):
    """The estimator ``name`` fitted on tiny data with ``d`` features (once per module; with
    ``params``, a fresh fit with them set, not cached)."""
    key = (name, d)
    if key not in _CACHE or params:
        est = FACTORIES[name]().set_params(**params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(*training_data(name, d))
        if params:
            return est
        _CACHE[key] = est
    return _CACHE[key]


@st.composite
def collections(draw, d=None):
    """``(X, d, injected, largest)``: sets, features, NaN/inf injected?, largest finite |value|."""
    d = draw(st.sampled_from(DIMS)) if d is None else d
    n_sets = draw(st.integers(1, 3))
    form = draw(st.sampled_from(["list", "list", "object", "3d"]))
    sizes = draw(st.lists(st.integers(1, 200), min_size=n_sets, max_size=n_sets))
    if form == "3d":
        sizes = [sizes[0]] * n_sets
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    scale = draw(st.sampled_from(SCALES))
    offset = draw(st.sampled_from([0.0, 0.0, 1.0, -1e6]))
    shape_kind = draw(st.sampled_from(["normal", "normal", "normal", "constant", "lognormal"]))
    inject = draw(st.sampled_from([None] * 6 + ["nan", "inf", "-inf"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    X = []
    for n in sizes:
        if shape_kind == "constant":
            x = np.full((n, d), rng.normal())
        elif shape_kind == "lognormal":
            x = rng.lognormal(sigma=3.0, size=(n, d))
        else:
            x = rng.normal(size=(n, d))
        x = x * scale + offset
        if dtype.kind == "i":
            info = np.iinfo(dtype)
            x = np.clip(np.round(x), info.min, info.max)
        X.append(x.astype(dtype))
    injected = inject is not None and dtype.kind == "f"
    largest = max(float(np.abs(x.astype(np.float64)).max()) for x in X)
    if injected:
        i = int(rng.integers(n_sets))
        X[i][rng.integers(sizes[i]), rng.integers(d)] = {"nan": np.nan, "inf": np.inf,
                                                         "-inf": -np.inf}[inject]
    if form == "3d":
        X = np.stack(X)
    elif form == "object":
        arr = np.empty(n_sets, dtype=object)
        arr[:] = X
        X = arr
    return X, d, injected, largest


def _outputs(est, X, method):
    if method == "predict" and hasattr(est, "predict_proba"):  # predict_log_proba: its log
        return [est.predict_proba(X), np.exp(est.predict_log_proba(X))]
    if method == "predict" and hasattr(est, "predict"):
        return [est.predict(X)]
    out = est.transform(X)
    if hasattr(est, "predict"):
        return [out]
    if isinstance(out, list) or (isinstance(out, np.ndarray) and out.dtype == object):
        out = np.concatenate(list(out))
    return [out]


def _check(est, X, injected, largest, method="predict"):
    n_sets = len(X)
    try:
        outs = _outputs(est, X, method)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        # the one documented refusal of finite inputs: values too large for the compute dtype
        # (1e15 for float32); never for moderate values
        too_large = "too large" in msg and largest > 1e6
        if injected:
            assert "NaN" in msg or "infinity" in msg or too_large, msg
            return
        assert too_large, f"unexpected error for finite input (largest |x| {largest:g}): {msg}"
        return
    assert not injected, "NaN/inf in the input was not refused"
    for out in outs:
        assert np.isfinite(out).all(), f"non-finite output for finite input ({type(est).__name__})"
    first = outs[0]
    if method == "transform":
        assert first.shape[0] == n_sets or isinstance(est, NystromFeatures)
    elif hasattr(est, "predict_proba"):
        assert first.shape == (n_sets, len(est.classes_))
        np.testing.assert_allclose(first.sum(1), 1.0, rtol=1e-6)
        assert (first >= 0).all() and (first <= 1).all()
    elif hasattr(est, "predict"):
        assert first.shape == (n_sets,)
    elif isinstance(est, OTKEmbedding):
        assert first.shape == (n_sets, est._n_features_out)


@pytest.mark.filterwarnings("ignore")
@FUZZ
@given(data=collections(), method=st.sampled_from(["predict", "predict", "transform"]),
       log_eps=st.floats(-3.0, 1.0))
def test_fuzz_estimators(data, method, log_eps):
    """Every estimator on the same collection: N_EXAMPLES examples for each of them.

    The OTK embeddings are fitted and transform with ``epsilon = 10**log_eps`` (1e-3..10; a
    fitted embedding refuses another ``epsilon`` set after its fit).
    """
    X, d, injected, largest = data
    for name in FACTORIES:
        est = fitted(name, d)
        if isinstance(est, OTKEmbedding):
            est = fitted(name, d, epsilon=float(10.0**log_eps))
        try:
            _check(est, X, injected, largest, method)
        except AssertionError as exc:
            raise AssertionError(f"{name}.{method} (epsilon=10**{log_eps:.3g}): {exc}") from exc


def test_every_public_estimator_is_fuzzed():
    from sklearn.base import BaseEstimator

    import skset

    public = {n for n in skset.__all__
              if isinstance(getattr(skset, n), type) and issubclass(getattr(skset, n), BaseEstimator)}
    fuzzed = {type(f()).__name__ for f in FACTORIES.values()}
    # the clustering estimators take other inputs (labelled instances, one 2-D data set); they
    # are fuzzed in test_cluster.py
    fuzzed |= {"ABCClusterer", "EigengapSpectralClustering"}
    assert public <= fuzzed, f"add {sorted(public - fuzzed)} to FACTORIES"


@settings(FUZZ, max_examples=max(N_EXAMPLES // 4, 1))
@given(B=st.integers(1, 4), n=st.integers(1, 50), p=st.integers(1, 16),
       log_eps=st.floats(-3.0, 1.0), log_scale=st.sampled_from([-30, -3, 0, 2, 10, 30]),
       dtype=st.sampled_from([torch.float32, torch.float64]), seed=st.integers(0, 2**31 - 1))
def test_fuzz_sinkhorn(B, n, p, log_eps, log_scale, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    K = torch.randn(B, n, p, generator=g, dtype=torch.float64) * 10.0**log_scale
    K = K.clamp(-torch.finfo(dtype).max / 4, torch.finfo(dtype).max / 4).to(dtype)
    lengths = torch.randint(1, n + 1, (B,), generator=g)
    mask = torch.arange(n)[None, :] < lengths[:, None]
    eps = float(10.0**log_eps)
    P = sinkhorn(K, mask, epsilon=eps, n_iter=10)
    assert torch.isfinite(P).all()
    assert (P >= 0).all()
    assert (P[~mask] == 0).all()
    # the last update is the column one: column sums are the reference weights 1/p, as long as
    # the potentials ~ |K|/epsilon are resolved by the dtype (beyond, the plan stays finite and
    # non-negative but its marginals degrade: rounding of logK + f + g)
    if float(K.abs().max()) / eps > (1e4 if dtype == torch.float32 else 1e12):
        return
    torch.testing.assert_close(P.sum(1).double(), torch.full((B, p), 1.0 / p, dtype=torch.float64),
                               rtol=1e-3, atol=1e-6)


@pytest.mark.filterwarnings("ignore")
@settings(FUZZ, max_examples=max(N_EXAMPLES // 4, 1))
@given(data=collections(), name=st.sampled_from(["NystromFeatures", "OTKEmbedding",
                                                 "OTKEmbedding-q2-pos", "DilatedKernelFeatures",
                                                 "pipeline"]))
def test_fuzz_partial_fit(data, name):
    """A later ``partial_fit`` chunk (directly, or through :func:`skset.utils.partial_fit` on a
    Nystrom -> OTK pipeline) gets the same contract as ``transform``: a clear error for NaN/inf
    (or values too large for float32), otherwise a model that still transforms to finite
    output. The fitted model of the other tests is not touched (a copy is updated)."""
    import copy

    from sklearn.pipeline import make_pipeline

    from skset.utils import partial_fit

    X, d, injected, largest = data
    if name == "pipeline":
        est = make_pipeline(copy.deepcopy(fitted("NystromFeatures", d)),
                            copy.deepcopy(fitted("OTKEmbedding", 4)))
        if est[0].n_components_ != 4:
            return  # the OTK step was fitted on 4 Nystrom features (n_components=4)
        update = lambda: partial_fit(est, X)  # noqa: E731
    else:
        est = copy.deepcopy(fitted(name, d))
        update = lambda: est.partial_fit(X)  # noqa: E731
    try:
        update()
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        too_large = "too large" in msg and largest > 1e6
        if injected:
            assert "NaN" in msg or "infinity" in msg or too_large, f"{name}: {msg}"
            return
        assert too_large, f"{name}: unexpected error for finite input (largest {largest:g}): {msg}"
        return
    assert not injected, f"{name}: NaN/inf in the input was not refused"
    out = est.transform(X)
    out = np.concatenate(list(out)) if isinstance(out, list) or out.dtype == object else out
    assert np.isfinite(out).all(), f"{name}: non-finite output after partial_fit"


_PIPES = {}


def fitted_pipeline(d: int):
    """NystromFeatures -> OTKEmbedding -> SGDClassifier fitted by skset.utils.partial_fit on
    tiny data with ``d`` features (once per module)."""
    if d not in _PIPES:
        from sklearn.linear_model import SGDClassifier
        from sklearn.pipeline import make_pipeline

        from skset.utils import partial_fit

        rng = np.random.default_rng(d)
        X = [rng.normal(size=(int(n), d)) for n in rng.integers(3, 9, 6)]
        pipe = make_pipeline(NystromFeatures(n_components=4, random_state=0),
                             OTKEmbedding(n_supports=3, sinkhorn_iter=100, random_state=0),
                             SGDClassifier(loss="log_loss", random_state=0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            partial_fit(pipe, X, np.arange(6) % 3, classes=[0, 1, 2])
        _PIPES[d] = pipe
    return _PIPES[d]


def _fitted_state(est) -> dict:
    """Every fitted attribute of ``est`` (of each step of a pipeline) as plain values."""
    steps = [s for _, s in est.steps] if hasattr(est, "steps") else [est]
    out = {}
    for i, step in enumerate(steps):
        for k, v in vars(step).items():
            if k.endswith("_") and not k.startswith("_"):
                if isinstance(v, torch.nn.Module):
                    v = {n: t.detach().cpu().numpy().copy() for n, t in v.state_dict().items()}
                out[i, k] = v.copy() if isinstance(v, np.ndarray) else repr(v)
    return out


def _same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k], b[k], equal_nan=True) if isinstance(a[k], np.ndarray)
        else a[k] == b[k] for k in a)


@pytest.mark.filterwarnings("ignore")
@settings(FUZZ, max_examples=max(N_EXAMPLES // 40, 1))
@given(data=collections(), target=st.sampled_from(
    ["pipeline", "NystromFeatures", "OTKEmbedding", "DeepSetsClassifier", "OTKRegressor"]),
    bad=st.sampled_from(["none", "y-short", "y-nan", "y-class", "y-mixed", "y-scalar",
                         "w-short", "w-negative", "dtype", "window"]))
def test_fuzz_partial_fit_refused_changes_nothing(data, target, bad):
    """A later ``partial_fit`` (directly, or :func:`skset.utils.partial_fit` through a
    pipeline) refused for any reason (bad X, y, sample_weight, a dtype or window changed by
    set_params) raises a ValueError / TypeError and changes no fitted attribute of any step;
    an accepted one leaves a model that transforms to finite output."""
    import copy

    from skset.utils import partial_fit

    X, d, injected, largest = data
    n = len(X)
    est = copy.deepcopy(fitted_pipeline(d) if target == "pipeline" else fitted(target, d))
    y = np.arange(n) % 2
    y = y + 0.5 if "Regressor" in target else y
    w = None
    if bad == "y-short":
        y = y[:-1]
    elif bad == "y-nan":
        y = y.astype(float)
        y[0] = np.nan
    elif bad == "y-class":
        y = np.full(n, 7)
    elif bad == "y-mixed":  # (mixed only from two sets on)
        y = np.array(["a"] + list(y[1:]), dtype=object)
    elif bad == "y-scalar":
        y = np.array(1.0)
    elif bad == "w-short":
        w = np.ones(n + 1)
    elif bad == "w-negative":
        w = -np.ones(n)
    elif bad == "dtype":
        est.set_params(**{f"{'nystromfeatures__' if target == 'pipeline' else ''}dtype":
                          "float64"})
    elif bad == "window" and target in ("pipeline", "NystromFeatures"):
        est.set_params(**{f"{'nystromfeatures__' if target == 'pipeline' else ''}window": 2})
    before = _fitted_state(est)
    unlabelled = target in ("NystromFeatures", "OTKEmbedding")
    try:
        if target == "pipeline":
            partial_fit(est, X, y, sample_weight=w)
        elif unlabelled:
            est.partial_fit(X, None if bad in ("none", "dtype", "window") or bad.startswith("w")
                            else y, sample_weight=w)
        else:
            est.partial_fit(X, y, sample_weight=w)
    except (ValueError, TypeError) as exc:
        assert _same_state(before, _fitted_state(est)), f"{target}: refused ({exc}) but changed"
        return
    must_refuse = injected or (
        bad in ("w-short", "w-negative", "dtype")
        or (bad in ("y-short", "y-nan", "y-scalar") and target != "OTKEmbedding")
        or (bad == "y-mixed" and n > 1 and target != "OTKEmbedding")
        or (bad == "y-class" and target in ("pipeline", "DeepSetsClassifier"))
        or (bad == "window" and target in ("pipeline", "NystromFeatures")))
    assert not must_refuse, f"{target}: {bad} (NaN/inf injected: {injected}) was accepted"
    out = est.transform(X) if not hasattr(est, "predict") else est.predict(X)
    out = np.concatenate(list(out)) if isinstance(out, list) or out.dtype == object else out
    assert np.isfinite(out.astype(float)).all(), f"{target}: non-finite output"


@settings(FUZZ, max_examples=max(N_EXAMPLES // 4, 1))
@given(overrides=st.dictionaries(
    st.sampled_from(["MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_", "SKSET_FUZZ_VARIABLE"]),
    st.one_of(st.none(), st.text(max_size=5), st.integers(-5, 2**40), st.floats(),
              st.booleans(), st.lists(st.integers(), max_size=2)), max_size=3))
def test_fuzz_worker_allocator(overrides):
    """``skset.distributed.worker_allocator``: a value that is not a string, an int or None is a
    TypeError naming it, a NUL character a ValueError, and nothing changes; otherwise the dask
    configuration and ``os.environ`` hold the values as strings inside the block and are
    restored after it."""
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")  # defines the nanny's configuration
    sd = pytest.importorskip("skset.distributed")

    key = "distributed.nanny.pre-spawn-environ"
    config, environ = dict(dask.config.get(key)), dict(os.environ)
    bad = [k for k, v in overrides.items() if isinstance(v, (bool, float, list))]
    nul = [k for k, v in overrides.items() if isinstance(v, str) and "\x00" in v]
    try:
        with sd.worker_allocator(**overrides):
            assert not bad and not nul
            env = dask.config.get(key)
            for name, value in overrides.items():
                if value is not None:
                    assert env[name] == str(value) == os.environ[name]
    except TypeError as exc:
        assert bad and "must be a string, an int or None" in str(exc)
    except ValueError as exc:
        assert nul and "NUL" in str(exc)
    assert dict(dask.config.get(key)) == config and dict(os.environ) == environ


@settings(FUZZ, max_examples=max(N_EXAMPLES // 8, 1))
@given(data=collections(), chunk_size=st.integers(1, 3), named=st.booleans())
def test_fuzz_iter_transform(data, chunk_size, named):
    """:func:`skset.utils.iter_transform` (``ids=`` or not) in chunks of 1-3 sets: a set with
    NaN/inf is refused by a ValueError that names it by its position in the stream or by its
    id, not by its position in a chunk; otherwise the chunks' outputs are ``transform``'s."""
    from skset.utils import iter_transform

    X, d, injected, largest = data
    est = fitted("OTKEmbedding", d)
    sets = list(X)
    ids = [f"s{i}" for i in range(len(sets))] if named else None
    bad = [i for i, s in enumerate(sets) if not np.isfinite(np.asarray(s, dtype=float)).all()]
    try:
        out = np.concatenate(list(iter_transform(est, sets, chunk_size=chunk_size, ids=ids)))
    except ValueError as exc:
        msg = str(exc)
        if "too large" in msg and largest > 1e6:
            return
        assert bad, f"unexpected error for finite input: {msg}"
        first = f"set {ids[bad[0]]!r}" if named else f"set {bad[0]}"
        assert first in msg, f"{first} not named: {msg}"
        return
    assert not bad, "NaN/inf in the input was not refused"
    # batches cut otherwise: float32 rounding, and the Sinkhorn tolerance (1e-4) may stop a set
    # at another check
    np.testing.assert_allclose(out, est.transform(sets), rtol=1e-3, atol=1e-3)
