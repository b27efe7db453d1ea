"""The compiled OTK path (``skset.set_config(compile=True)``): same embeddings as the eager code,
no recompilation per shape, and a warning plus the eager code where compiling fails.

Compiling is slow (seconds per kernel, cached on disk by torch afterwards): the tests share the
kernels of one process (tiny shapes, float32), and the module is skipped, with the reason, where
torch.compile does not work.
"""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from conftest import make_sets

import skset
from skset import CompileWarning, OTKEmbedding
from skset._sets import pack
from skset.nn import OTKLayer, otk_embed
from skset.ot import _compiled


def _raw(**kw):
    """An OTKEmbedding returning raw embeddings (no centring or scaling, which would magnify the
    rounding of embeddings near the mean)."""
    kw.setdefault("random_state", 0)
    return OTKEmbedding(center=False, normalize=False, **kw)


def _sets(seed=0, n_sets=12, d=4, low=1, high=15):
    return make_sets(np.random.default_rng(seed), n_sets=n_sets, d=d, low=low, high=high,
                     dtype=np.float32)


def _both(est, sets, **kw):
    eager = est.transform(sets, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)  # a failure here is a bug, not a fallback
        with skset.config_context(compile=True):
            compiled = est.transform(sets, **kw)
    return eager, compiled


def _close(compiled, eager, tol=1e-5):
    scale = np.abs(eager).max()
    np.testing.assert_allclose(compiled, eager, rtol=tol, atol=tol * scale)


@pytest.fixture(scope="module")
def compiled_ok():
    """Compile the base kernels once for the module; skip it where torch.compile fails here."""
    sets = _sets()
    est = _raw(n_supports=3, sinkhorn_iter=10, sinkhorn_tol=None).fit(sets)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CompileWarning)
        with skset.config_context(compile=True):
            est.transform(sets)
    failed = [w for w in caught if issubclass(w.category, CompileWarning)]
    if failed or _compiled.compile_failed():
        pytest.skip(f"torch.compile does not work here: {_compiled.compile_failed()}")
    return est


# -- configuration -------------------------------------------------------------------------------
def test_config_set_get_context():
    assert skset.get_config() == {"compile": False, "n_threads": "auto"}
    with skset.config_context(compile=True):
        assert skset.get_config()["compile"] is True
        skset.set_config(compile=None)  # None: unchanged
        assert skset.get_config()["compile"] is True
    assert skset.get_config()["compile"] is False
    with pytest.raises(RuntimeError), skset.config_context(compile=True):
        raise RuntimeError
    assert skset.get_config()["compile"] is False  # restored on an exception too
    for bad in ("auto", 1, None.__class__):
        with pytest.raises(ValueError, match="compile must be True or False"):
            skset.set_config(compile=bad)
    cfg = skset.get_config()
    cfg["compile"] = True  # a copy
    assert skset.get_config()["compile"] is False


# -- same embeddings as eager ----------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    {},
    {"n_references": 3},
    {"position_sigma": 0.5},
    {"position_sigma": 0.5, "position_mode": "plan"},
    {"position_sigma": 0.3, "position_mode": "similarity", "n_references": 2},
    {"sinkhorn_iter": 7},  # 5 + 2 single iterations
], ids=str)
def test_fixed_count_equals_eager(compiled_ok, kw):
    """Fixed iteration counts: every shape of the OTK tests (lengths 1..14, one set alone, a
    budget of 5 padded elements: batches of one set), to 1e-5."""
    kw = {"n_supports": 3, "sinkhorn_iter": 10, "sinkhorn_tol": None, **kw}
    sets = _sets()
    est = _raw(**kw).fit(sets)
    _close(*_both(est, sets))
    _close(*_both(est, sets[3:4]))  # one set (padded to two inside)
    _close(*_both(est.set_params(max_elements=5), sets))


def _masses(sets, seed=1):
    """Element masses with zeros (never all zero on a set)."""
    rng = np.random.default_rng(seed)
    masses = [rng.uniform(0, 1, len(s)) * (rng.uniform(size=len(s)) > 0.2) for s in sets]
    return [m if m.sum() > 0 else np.ones(len(m)) for m in masses]


def test_element_weight_equal_eager(compiled_ok):
    sets = _sets(1)
    est = _raw(n_supports=3, sinkhorn_iter=10, sinkhorn_tol=None).fit(sets)
    _close(*_both(est, sets, element_weight=_masses(sets)))


def test_tolerance_stopping_float32(compiled_ok):
    """The default tolerance rule (checks every 5 iterations, sets stopping on their own): float32
    rounding can flip a set whose error is within rounding of the tolerance by one check, so
    float32 agrees to about the tolerance's effect on the plan (the float64 test: exactly)."""
    sets = _sets(1, high=30)
    est = _raw(n_supports=3, epsilon=0.05).fit(sets)  # tolerance 1e-4, cap 3000
    _close(*_both(est, sets), tol=1e-3)


@pytest.mark.slow
def test_tolerance_stopping_float64_equals_eager(compiled_ok):
    """The same checks, errors and stopped states as the eager rule: float64 agrees to 1e-10."""
    sets = [s.astype(np.float64) for s in _sets(1, high=30)]
    est = _raw(n_supports=3, epsilon=0.05, dtype="float64").fit(sets)
    _close(*_both(est, sets, element_weight=_masses(sets)), tol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("kw", [
    {"sinkhorn_method": "log"},
    {"epsilon": 1e-3},  # most sets leave the exp domain's safe range: the log-domain redo
    {"reg_m": 0.3},
    {"reg_m": 0.3, "sinkhorn_method": "log", "n_references": 2},
], ids=str)
def test_log_domain_and_unbalanced_equal_eager(compiled_ok, kw):
    kw = {"n_supports": 3, "sinkhorn_iter": 20, "sinkhorn_tol": None, **kw}
    sets = [10 * s for s in _sets(2, d=5)]
    est = _raw(**kw).fit(sets)
    _close(*_both(est, sets))


def test_normalized_transform_and_threads(compiled_ok):
    """The estimator's full output (centred, scaled) and the length batches run side by side on
    two threads (the compiled entry point releases the GIL) equal the eager one-thread output."""
    sets = _sets(3, n_sets=60, high=40)
    est = OTKEmbedding(n_supports=3, sinkhorn_iter=10, sinkhorn_tol=None, max_elements=200,
                       random_state=0).fit(sets)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        eager = est.transform(sets)
        torch.set_num_threads(2)
        with skset.config_context(compile=True):
            compiled = est.transform(sets)
    finally:
        torch.set_num_threads(before)
    _close(compiled, eager, tol=1e-4)  # centring cancels most of each row: relative 1e-4


# -- no recompilation per shape -------------------------------------------------------------------
def test_no_recompile_across_lengths_batches_and_settings(compiled_ok):
    from torch._dynamo.utils import counters

    est = compiled_ok
    graphs = counters["stats"]["unique_graphs"]
    keys = set(_compiled.compile_seconds)
    with skset.config_context(compile=True):
        for seed, (low, high, n_sets) in enumerate([(1, 3, 2), (20, 60, 7), (2, 9, 40)]):
            est.transform(_sets(seed, n_sets=n_sets, low=low, high=high))
        est.transform(_sets(9)[:1])  # one set
        est.transform([np.ones((1, 4), np.float32)] * 3)  # sets of one element
        # another epsilon (a graph input), in a model fitted with it (a fitted one refuses it)
        _raw(n_supports=3, sinkhorn_iter=10, sinkhorn_tol=None, epsilon=0.37).fit(
            _sets()).transform(_sets(4))
        other = _raw(n_supports=5, sinkhorn_iter=10, sinkhorn_tol=None).fit(_sets(5, d=6))
        other.transform(_sets(6, d=6))  # another estimator: other p and d
    assert set(_compiled.compile_seconds) == keys
    assert counters["stats"]["unique_graphs"] == graphs


# -- the layer ------------------------------------------------------------------------------------
def test_layer_forward_without_autograd_garbage_padding(compiled_ok):
    sets = _sets(7)
    X, M = pack(sets, dtype=torch.float32, n_max=17)
    X = torch.where(M.unsqueeze(-1), X, torch.tensor(float("nan")))  # padding holds NaN
    W = torch.where(M, torch.rand(M.shape, generator=torch.Generator().manual_seed(0)) + 0.1,
                    torch.tensor(float("inf")))
    layer = OTKLayer(4, 3, 2, epsilon=0.5, sinkhorn_iter=10, position_sigma=0.4)
    with torch.no_grad():
        eager = layer(X, M, W)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)
            compiled = layer(X, M, W, compile=True)
    assert torch.isfinite(compiled).all()
    _close(compiled.numpy(), eager.numpy())


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_supervised_predict_runs_compiled(compiled_ok, monkeypatch):
    """OTKClassifier's prediction (its OTK layer without autograd) takes the compiled path."""
    sets = _sets(10, n_sets=30, d=3, low=3)
    clf = skset.OTKClassifier(n_components=4, n_supports=3, max_iter=2, random_state=0,
                              device="cpu").fit(sets, np.arange(30) % 2)
    eager = clf.predict_proba(sets)
    calls, run = [], _compiled.otk_embed
    monkeypatch.setattr(_compiled, "otk_embed", lambda *a, **k: calls.append(1) or run(*a, **k))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        with skset.config_context(compile=True):
            compiled = clf.predict_proba(sets)
    assert calls
    _close(compiled, eager)


def test_autograd_runs_eager(compiled_ok, monkeypatch):
    """Training differentiates the eager computation: the compiled path is not entered."""
    calls = []
    monkeypatch.setattr(_compiled, "otk_embed", lambda *a, **k: calls.append(1))
    layer = OTKLayer(4, 3, epsilon=0.5)
    X, M = pack(_sets(8), dtype=torch.float32)
    layer(X, M, compile=True).sum().backward()
    assert layer.references.grad is not None and not calls
    with torch.no_grad():
        layer(X, M, compile=True)  # returns None from the spy: the eager code runs
    assert calls == [1]


def test_engine_reads_no_global_setting(compiled_ok, monkeypatch):
    """The engine layer takes compile as an argument: skset.set_config(compile=True) alone
    leaves OTKLayer and otk_embed eager (the estimators read the setting and pass it)."""
    calls = []
    monkeypatch.setattr(_compiled, "otk_embed", lambda *a, **k: calls.append(1))
    layer = OTKLayer(4, 3, epsilon=0.5)
    X, M = pack(_sets(8), dtype=torch.float32)
    with skset.config_context(compile=True), torch.no_grad():
        layer(X, M)
        otk_embed(X, M, layer.references, epsilon=0.5)
        assert not calls
        otk_embed(X, M, layer.references, epsilon=0.5, compile=True)
    assert calls == [1]


def test_otk_embed_rejects_like_eager(compiled_ok):
    X, M = pack(_sets(8), dtype=torch.float32)
    M[2] = False
    refs = torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match="mask row 2 is all False"):
        otk_embed(X, M, refs, epsilon=0.5, compile=True)
    with pytest.raises(ValueError, match="epsilon"):
        otk_embed(X, None, refs, epsilon=-1.0, compile=True)
    assert _compiled.compile_failed() is None



def test_caller_errors_and_spoilt_plans_raise_as_eager_and_keep_compiling(compiled_ok):
    """A bad ``reg_m`` raised inside the compiled driver was taken for a compiler failure (a
    CompileWarning, and every later call eager); plans out of range (``epsilon`` below float64's
    range in the log domain, where float32 sets beyond float32's are solved) and a NaN the layer
    did not check (``padding_zero=True``) returned NaN where the eager code names them; a data
    warning turned into an error by the caller's filters also switched compiling off."""
    X, M = pack(_sets(8), dtype=torch.float32)
    refs = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        with torch.no_grad(), pytest.raises(ValueError, match="reg_m must be None or a positive"):
            otk_embed(X, M, refs, epsilon=0.5, reg_m=-1.0, compile=True)
        for method in ("log", "auto"):
            with pytest.raises(ValueError) as eager:
                otk_embed(X, M, refs, epsilon=1e-320, method=method)
            with torch.no_grad(), pytest.raises(ValueError) as compiled:
                otk_embed(X, M, refs, epsilon=1e-320, method=method, compile=True)
            assert str(compiled.value) == str(eager.value)
        layer = OTKLayer(4, 3, references=refs)
        Xn = X.clone()
        Xn[0, 1, 0] = float("nan")
        with pytest.raises(ValueError) as eager:
            layer(Xn, M, padding_zero=True)
        with torch.no_grad(), pytest.raises(ValueError) as compiled:
            layer(Xn, M, compile=True, padding_zero=True)
        assert str(compiled.value) == str(eager.value)
        big = X.clone()
        big[:2] += 10.0
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with torch.no_grad(), pytest.raises(RuntimeWarning, match="not finite"):
                otk_embed(3 * big, M, refs, epsilon=1e-2, method="exp", compile=True)
    assert _compiled.compile_failed() is None


def test_exp_domain_overflow_warns_like_eager(compiled_ok):
    """``method="exp"`` returns what it computed, compiled or not; the compiled kernels name the
    sets whose embedding is not finite as the eager solver does (they returned NaN silently)."""
    sets = [3 * s for s in _sets(9, n_sets=6)]
    X, M = pack(sets, dtype=torch.float32)
    X[:2] += 10.0  # far from the references: the exp-domain scalings overflow at this epsilon
    refs = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(0))
    kw = dict(epsilon=1e-2, method="exp", sinkhorn_iter=10)
    with torch.no_grad():
        with pytest.warns(RuntimeWarning, match="sinkhorn\\(method='exp'\\).*not finite") as eager_w:
            eager = otk_embed(X, M, refs, **kw)
        with pytest.warns(RuntimeWarning, match="sinkhorn\\(method='exp'\\).*not finite") as comp_w:
            compiled = otk_embed(X, M, refs, compile=True, **kw)
    bad = ~torch.isfinite(eager).flatten(1).all(1)
    assert bad.any() and torch.equal(bad, ~torch.isfinite(compiled).flatten(1).all(1))
    named = [str(w.message).split("(set ")[1].split(")")[0] for w in (eager_w[0], comp_w[0])]
    assert named[0] == named[1]
    assert _compiled.compile_failed() is None

# -- fallback -------------------------------------------------------------------------------------
@pytest.fixture
def fresh_compiled_state():
    """A process state where nothing was compiled or failed yet; restored afterwards."""
    saved = (dict(_compiled._compiled), set(_compiled._warm), dict(_compiled._state),
             dict(_compiled.compile_seconds))
    _compiled._compiled.clear()
    _compiled._warm.clear()
    _compiled._state["failed"] = None
    yield
    _compiled._compiled.clear()
    _compiled._compiled.update(saved[0])
    _compiled._warm.clear()
    _compiled._warm.update(saved[1])
    _compiled._state.update(saved[2])
    _compiled.compile_seconds.clear()
    _compiled.compile_seconds.update(saved[3])


def test_compile_failure_warns_once_and_runs_eager(monkeypatch, fresh_compiled_state):
    def broken(fn, device_type):
        def fail(*args, **kwargs):
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found")
        return fail

    monkeypatch.setattr(_compiled, "_compile", broken)
    sets = _sets()
    est = _raw(n_supports=3, sinkhorn_iter=10, sinkhorn_tol=None).fit(sets)
    eager = est.transform(sets)
    with skset.config_context(compile=True):
        with pytest.warns(CompileWarning, match="No working C.. compiler") as record:
            first = est.transform(sets)
        assert len([w for w in record if issubclass(w.category, CompileWarning)]) == 1
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)  # once per process
            second = est.transform(sets)
    np.testing.assert_array_equal(first, eager)
    np.testing.assert_array_equal(second, eager)
    assert "No working C++ compiler" in _compiled.compile_failed()


@pytest.mark.slow
def test_no_compiler_in_a_subprocess(tmp_path):
    """A real failure: no C++ compiler (CXX names a missing program, empty kernel cache)."""
    code = """
import warnings, numpy as np, skset
sets = [np.random.default_rng(i).normal(size=(5 + i, 3)).astype(np.float32) for i in range(6)]
est = skset.OTKEmbedding(n_supports=2, sinkhorn_iter=10, sinkhorn_tol=None, device="cpu",
                         random_state=0).fit(sets)
eager = est.transform(sets)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with skset.config_context(compile=True):
        out = est.transform(sets)
        est.transform(sets)
n = sum(issubclass(x.category, skset.CompileWarning) for x in w)
print("WARNINGS", n, "EQUAL", bool(np.array_equal(out, eager)))
"""
    env = dict(os.environ, CXX=str(tmp_path / "no-such-compiler"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=600)
    assert "WARNINGS 1 EQUAL True" in out.stdout, out.stdout + out.stderr[-3000:]


def test_non_finite_references_go_to_the_eager_code(monkeypatch):
    """References holding NaN or inf never reach the compiled kernels (which returned a NaN
    embedding): the eager code runs and names the sets it spoils."""
    from skset.ot import _compiled

    monkeypatch.setattr(_compiled, "otk_embed", lambda *a, **k: pytest.fail("compiled"))
    x = torch.randn(2, 3, 2)
    Z = torch.randn(1, 2, 2)
    Z[0, 1, 0] = float("nan")
    mask = torch.ones(2, 3, dtype=torch.bool)
    assert _compiled.try_embed(x, mask, Z, None, compile=True, epsilon=0.5, sinkhorn_iter=10,
                               method="auto", sinkhorn_tol=None, position_sigma=None,
                               position_mode="kernel", reg_m=None) is None
    with pytest.raises(ValueError, match="NaN"):
        otk_embed(x, None, Z, epsilon=0.5, compile=True)


def test_compiling_raises_dynamos_recompile_limit(compiled_ok):
    # a process mixing settings compiles a dozen variants of some kernels; at dynamo's default
    # limit of 8 the rest ran uncompiled without a warning
    assert torch._dynamo.config.recompile_limit >= _compiled._RECOMPILE_LIMIT >= 12
