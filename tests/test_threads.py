"""skset's thread policy (``skset.set_config(n_threads=...)``, :mod:`skset._threads`): the
setting, the usable cores, the size rule, the pools inside and outside skset's calls, and
results bit-identical under the default policy, one thread and two threads."""

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from threadpoolctl import threadpool_info

import skset
from skset import NystromFeatures, OTKEmbedding, SetTransformerRegressor
from skset import _threads as T
from skset.utils import limit_threads


def _sets(n=60, d=5, seed=0, low=3, high=30):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(int(k), d)) for k in rng.integers(low, high, n)]


def _pool_counts():
    return sorted((p["filepath"], p["num_threads"]) for p in threadpool_info())


@pytest.fixture(autouse=True)
def idle_machine(monkeypatch):
    """The machine seen as idle and large enough to keep its BLAS threads (tests that want it busy
    or small say so), and numpy's and scipy's pools given back first if an earlier call lowered
    them."""
    T._set_outside(False)
    monkeypatch.setattr(T, "_real_machine_busy", T.machine_busy, raising=False)
    monkeypatch.setattr(T, "machine_busy", lambda max_age=1.0: False)
    monkeypatch.setattr(T, "FEW_CORES", 0)
    yield
    T._set_outside(False)


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


# -- the setting ------------------------------------------------------------------------------------
def test_set_config_n_threads_checked_and_restored():
    assert skset.get_config()["n_threads"] == "auto"
    with skset.config_context(n_threads=3):
        assert skset.get_config()["n_threads"] == 3
    assert skset.get_config()["n_threads"] == "auto"
    for bad in (0, -1, 1.5, True, "many", [2]):
        with pytest.raises(ValueError, match="n_threads"):
            skset.set_config(n_threads=bad)
    # a bad value leaves every setting as it was, compile included
    with pytest.raises(ValueError, match="n_threads"):
        skset.set_config(compile=True, n_threads=0)
    assert skset.get_config() == {"compile": False, "n_threads": "auto"}


def test_env_default(monkeypatch):
    from skset import _config

    monkeypatch.setenv("SKSET_NUM_THREADS", "2")
    assert _config._n_threads_from_env() == 2
    monkeypatch.setenv("SKSET_NUM_THREADS", "auto")
    assert _config._n_threads_from_env() == "auto"
    monkeypatch.setenv("SKSET_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="SKSET_NUM_THREADS"):
        _config._n_threads_from_env()


# -- the machine ------------------------------------------------------------------------------------
def test_usable_cores_follow_affinity_and_quota(monkeypatch):
    import os

    T.usable_cores.cache_clear()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(T, "_cgroup_cpus", lambda: None)
    assert T.usable_cores() == 4
    T.usable_cores.cache_clear()
    monkeypatch.setattr(T, "_cgroup_cpus", lambda: 1.5)  # a quota of 1.5 CPUs: 2 threads
    assert T.usable_cores() == 2
    T.usable_cores.cache_clear()
    monkeypatch.setattr(T, "_cgroup_cpus", lambda: 0.2)
    assert T.usable_cores() == 1
    T.usable_cores.cache_clear()


def test_cgroup_quota_files(monkeypatch, tmp_path):
    import builtins

    real_open = builtins.open
    files = {"/sys/fs/cgroup/cpu.max": "150000 100000\n"}

    def fake_open(path, *a, **k):
        if str(path) in files:
            p = tmp_path / "f"
            p.write_text(files[str(path)])
            return real_open(p, *a, **k)
        if str(path).startswith("/sys/fs/cgroup"):
            raise FileNotFoundError(path)
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", fake_open)
    assert T._cgroup_cpus() == 1.5
    files["/sys/fs/cgroup/cpu.max"] = "max 100000\n"
    assert T._cgroup_cpus() is None
    del files["/sys/fs/cgroup/cpu.max"]
    files["/sys/fs/cgroup/cpu/cpu.cfs_quota_us"] = "200000\n"
    files["/sys/fs/cgroup/cpu/cpu.cfs_period_us"] = "100000\n"
    assert T._cgroup_cpus() == 2.0
    files["/sys/fs/cgroup/cpu/cpu.cfs_quota_us"] = "-1\n"
    assert T._cgroup_cpus() is None


def test_machine_busy_reads_pressure_or_load(monkeypatch):
    import os

    monkeypatch.setattr(T, "machine_busy", T._real_machine_busy)
    monkeypatch.setattr(T, "_busy_cache", (-1.0, False))
    monkeypatch.setattr(T, "_cpu_pressure", lambda: 80.0)
    assert T.machine_busy(max_age=0) is True
    monkeypatch.setattr(T, "_cpu_pressure", lambda: 2.0)
    assert T.machine_busy(max_age=0) is False
    monkeypatch.setattr(T, "_cpu_pressure", lambda: None)
    monkeypatch.setattr(T, "usable_cores", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.5, 1.0, 1.0))
    assert T.machine_busy(max_age=0) is True
    monkeypatch.setattr(os, "getloadavg", lambda: (1.9, 1.0, 1.0))
    assert T.machine_busy(max_age=0) is False


# -- the size rule ------------------------------------------------------------------------------------
def test_work_size_of_inputs():
    sets = [np.zeros((10, 3)), np.zeros((20, 3))]
    assert T.set_work_size(sets) == 90
    assert T.set_work_size(sets, width=64) == 30 * 64
    assert T.set_work_size(np.zeros((4, 10, 3))) == 120
    assert T.set_work_size([]) == 0
    assert T.set_work_size(object()) is None
    assert T.set_work_size([[1, 2], "ab"]) is None
    # a long list: estimated from a sample of its sets, exact when they are alike
    assert T.set_work_size([np.zeros((7, 2))] * 1000) == 14_000


def test_threads_for_size_setting_and_cap(monkeypatch):
    monkeypatch.setattr(T, "usable_cores", lambda: 4)
    assert T.threads_for(10, cap=8) == 1
    assert T.threads_for(T.SMALL_WORK, cap=8) == 4
    assert T.threads_for(None, cap=2) == 2  # unknown size: the usable cores, at most torch's
    with skset.config_context(n_threads=3):
        assert T.threads_for(10, cap=8) == 3


def test_training_work_is_one_batch():
    """A training call counts one batch, its forward and backward passes (TRAINING_WORK_FACTOR
    times); a prediction the whole input."""
    est = SetTransformerRegressor(hidden_size=16, batch_size=10)
    sets = [np.zeros((5, 2))] * 40
    assert est._thread_work("fit", sets) == 40 * 5 * 16 * 10 / 40 * T.TRAINING_WORK_FACTOR
    assert est._thread_work("predict", sets) == 40 * 5 * 16
    # the measured sizes of the factor: 64 sets of 10-60 elements per batch on one thread, of
    # 50-300 on the usable cores
    assert T.threads_for(64 * 35 * 64 * T.TRAINING_WORK_FACTOR, cap=2) == 1
    assert T.threads_for(64 * 175 * 64 * T.TRAINING_WORK_FACTOR, cap=2) == min(2, T.usable_cores())


# -- the scope --------------------------------------------------------------------------------------
def test_scope_sets_and_restores_counts(two_threads, monkeypatch):
    monkeypatch.setattr(T, "usable_cores", lambda: 2)
    before = _pool_counts()
    seen = {}

    class Probe(NystromFeatures):
        def transform(self, X):
            seen["torch"] = torch.get_num_threads()
            seen["pools"] = [n for f, n in _pool_counts()
                             if not f.startswith(T.os.path.dirname(torch.__file__))]
            return super().transform(X)

    sets = _sets()
    est = Probe(n_components=4, random_state=0).fit(sets)
    est.transform(sets)
    assert seen == {"torch": 1, "pools": [1] * len(seen["pools"])}  # small: one thread
    assert torch.get_num_threads() == 2 and _pool_counts() == before
    monkeypatch.setattr(T, "SMALL_WORK", 100)
    est.transform(sets)  # large: the usable cores, the other pools still on one thread
    assert seen == {"torch": 2, "pools": [1] * len(seen["pools"])}
    with pytest.raises(ValueError):  # an error of the method: the counts restored
        est.transform([np.zeros((20, 7))])
    assert torch.get_num_threads() == 2 and _pool_counts() == before
    monkeypatch.setattr(T, "SMALL_WORK", 1 << 40)
    with skset.config_context(n_threads=2):
        est.transform(sets)
    assert seen["torch"] == 2
    assert torch.get_num_threads() == 2 and _pool_counts() == before


def test_scope_inside_limit_threads(two_threads):
    sets = _sets()
    with limit_threads(1):
        assert not T.adaptive()
        with skset.config_context(n_threads=2):
            with T.call_scope(1e12):
                assert torch.get_num_threads() == 2  # an explicit count wins
        with T.call_scope(1e12):
            assert torch.get_num_threads() == 1  # auto: at most torch's count
        NystromFeatures(n_components=4, random_state=0).fit(sets)
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


@pytest.fixture
def outside_blas(monkeypatch, two_threads):
    """``(est, sets, blas)``: a fitted NystromFeatures, its sets, and numpy's and scipy's BLAS
    controllers with their pools at two threads, no thread variable in the environment."""
    from threadpoolctl import threadpool_limits

    for k in T.THREAD_ENV:
        monkeypatch.delenv(k, raising=False)
    sets = _sets()
    est = NystromFeatures(n_components=4, random_state=0).fit(sets)
    with threadpool_limits(limits=2, user_api="blas"):
        yield est, sets, [c for c in T._pools() if c.user_api == "blas"]


def test_outside_pools_lowered_while_busy_then_given_back(monkeypatch, outside_blas):
    est, sets, blas = outside_blas
    monkeypatch.setattr(T, "machine_busy", lambda max_age=1.0: True)
    est.transform(sets)
    assert all(c.num_threads == 1 for c in blas)  # kept after the call
    monkeypatch.setattr(T, "machine_busy", lambda max_age=1.0: False)
    est.transform(sets)
    assert all(c.num_threads == 2 for c in blas)  # given back
    # a thread variable set by the user: the pools outside are left alone
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    monkeypatch.setattr(T, "machine_busy", lambda max_age=1.0: True)
    est.transform(sets)
    assert all(c.num_threads == 2 for c in blas)
    # an explicit n_threads too
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    with skset.config_context(n_threads=1):
        est.transform(sets)
    assert all(c.num_threads == 2 for c in blas)


def test_outside_pools_on_one_thread_on_few_cores(monkeypatch, outside_blas):
    """On a machine of at most FEW_CORES usable cores the BLAS pools stay on one thread between
    skset's calls even when it is idle; on a larger idle one they get their counts back."""
    est, sets, blas = outside_blas
    monkeypatch.setattr(T, "FEW_CORES", 2)
    monkeypatch.setattr(T, "usable_cores", lambda: 2)
    est.transform(sets)
    assert all(c.num_threads == 1 for c in blas)
    monkeypatch.setattr(T, "usable_cores", lambda: 8)
    est.transform(sets)
    assert all(c.num_threads == 2 for c in blas)


def test_transform_bit_identical_on_threads_and_busy(monkeypatch, two_threads):
    """The batches of a transform run side by side on the threads, on an idle machine and on a
    busy one: the same embedding as on one thread."""
    rng = np.random.default_rng(1)
    sets = [rng.normal(size=(n, 6)) for n in rng.integers(1, 80, 150)]
    est = OTKEmbedding(n_supports=4, max_elements=512, random_state=0).fit(sets)
    with skset.config_context(n_threads=1):
        one = est.transform(sets)
    with skset.config_context(n_threads=2):
        two = est.transform(sets)
    for k in T.THREAD_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(T, "SMALL_WORK", 0)  # threads for this small input
    monkeypatch.setattr(T, "machine_busy", lambda max_age=1.0: True)
    busy = est.transform(sets)
    np.testing.assert_array_equal(two, one)
    np.testing.assert_array_equal(busy, one)
    assert torch.get_num_threads() == 2


def test_warnings_point_at_the_callers_line():
    with pytest.warns(UserWarning, match="n_components") as rec:
        NystromFeatures(n_components=500, random_state=0).fit(_sets(n=5, high=6))
    assert {r.filename for r in rec if "n_components" in str(r.message)} == {__file__}
    with pytest.warns(UserWarning, match="n_supports") as rec:
        OTKEmbedding(n_supports=500, random_state=0).fit(_sets(n=5, high=6))
    assert {r.filename for r in rec if "n_supports" in str(r.message)} == {__file__}
    # a first partial_fit runs fit (two more of skset's frames): they pointed inside skset
    for est, word in ((NystromFeatures(n_components=500, random_state=0), "n_components"),
                      (OTKEmbedding(n_supports=500, random_state=0), "n_supports")):
        with pytest.warns(UserWarning, match=word) as rec:
            est.partial_fit(_sets(n=5, high=6))
        assert {r.filename for r in rec if word in str(r.message)} == {__file__}
        # fit_transform runs through scikit-learn's set_output wrapper: it pointed there
        with pytest.warns(UserWarning, match=word) as rec:
            clone(est).fit_transform(_sets(n=5, high=6))
        assert {r.filename for r in rec if word in str(r.message)} == {__file__}
    from sklearn.exceptions import ConvergenceWarning

    from skset import DeepSetsClassifier

    with pytest.warns(ConvergenceWarning) as rec:
        DeepSetsClassifier(max_iter=1, random_state=0).fit(_sets(n=6, high=6), [0, 1] * 3)
    assert {r.filename for r in rec if r.category is ConvergenceWarning} == {__file__}


def test_wrapped_methods_keep_name_doc_and_signature():
    import inspect

    assert OTKEmbedding.transform.__name__ == "transform"
    assert "element_weight" in inspect.signature(OTKEmbedding.transform).parameters
    assert OTKEmbedding.transform.__doc__ and OTKEmbedding.fit.__doc__
    assert getattr(OTKEmbedding.fit, "_skset_scoped", False)


# -- results under every policy --------------------------------------------------------------------
def _under(setting, fn):
    """``fn()`` under a thread setting: "auto" (threads for every size), 1, 2."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        if setting == "auto":
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(T, "SMALL_WORK", 0)  # the threaded path for these small inputs
                mp.setattr(T, "usable_cores", lambda: 2)
                return fn()
        with skset.config_context(n_threads=setting):
            return fn()
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("fit_method", ["kmeans", "wasserstein"])
def test_fits_and_transforms_bit_identical_across_policies(fit_method):
    sets = _sets(n=80, d=6, seed=3)
    test = _sets(n=30, d=6, seed=4)

    def run():
        nys = NystromFeatures(n_components=12, random_state=0).fit(sets)
        Z, Zt = nys.transform(sets), nys.transform(test)
        otk = OTKEmbedding(n_supports=5, n_references=2, fit_method=fit_method,
                           random_state=0).fit(Z)
        return np.concatenate([np.ravel(z) for z in Zt]), otk.transform(Zt)

    out = {s: _under(s, run) for s in ("auto", 1, 2)}
    for s in (1, 2):
        for a, b in zip(out["auto"], out[s], strict=True):
            np.testing.assert_array_equal(a, b)


def test_pipeline_probabilities_bit_identical_across_policies():
    rng = np.random.default_rng(5)
    sets = [rng.normal(size=(int(n), 4)) + (i % 3) for i, n in
            enumerate(rng.integers(4, 20, 90))]
    y = np.arange(90) % 3

    def run():
        pipe = make_pipeline(NystromFeatures(n_components=8, random_state=0),
                             OTKEmbedding(n_supports=4, random_state=0),
                             LogisticRegression(max_iter=500))
        return pipe.fit(sets, y).predict_proba(sets)

    out = {s: _under(s, run) for s in ("auto", 1, 2)}
    np.testing.assert_array_equal(out["auto"], out[1])
    np.testing.assert_array_equal(out["auto"], out[2])


def test_small_training_under_auto_is_the_one_thread_training(two_threads):
    """Training results depend on the thread count (torch's reductions): the default policy
    picks it from the size of a batch only, so a small fit is the one-thread fit."""
    sets = _sets(n=40, d=3, seed=6)
    y = np.array([s[:, 0].mean() for s in sets])

    def fit():
        return SetTransformerRegressor(hidden_size=8, n_inducing=4, max_iter=2,
                                       random_state=0).fit(sets, y).predict(sets)

    auto = fit()
    with skset.config_context(n_threads=1):
        one = fit()
    np.testing.assert_array_equal(auto, one)


def test_set_config_takes_numpy_integers():
    with skset.config_context(n_threads=np.int64(2)):
        assert skset.get_config()["n_threads"] == 2 and type(skset.get_config()["n_threads"]) is int
    with pytest.raises(ValueError, match="positive integer"):
        skset.set_config(n_threads=np.int64(0))


def test_inherited_methods_run_under_the_policy():
    """The networks' ``predict`` family and scikit-learn's ``score`` come from mixins: they run
    under the policy too (they were left out: ``n_threads=1`` ignored there)."""
    import skset
    from skset._threads import SCOPED_METHODS

    for cls in (skset.DeepSetsClassifier, skset.SetTransformerRegressor, skset.OTKClassifier,
                skset.ABCClusterer, skset.OTKEmbedding):
        for name in SCOPED_METHODS:
            method = getattr(cls, name, None)
            if callable(method):
                assert getattr(method, "_skset_scoped", False), f"{cls.__name__}.{name}"


def test_a_failed_scope_entry_leaves_no_trace(monkeypatch):
    """An error (or an interrupt) while a call's scope opens undoes it: later calls still run
    under the policy (the open count stayed raised, and every later call ignored it)."""
    import skset
    from skset import _threads

    X = [np.ones((3, 2)), np.zeros((4, 2))]
    otk = skset.OTKEmbedding(n_supports=2, random_state=0).fit(X)
    real = _threads.threads_for
    monkeypatch.setattr(_threads, "threads_for", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        otk.transform(X)
    assert _threads._depth == 0 and _threads._saved_pools is None
    monkeypatch.setattr(_threads, "threads_for", real)
    seen = []
    monkeypatch.setattr(_threads, "threads_for", lambda *a: seen.append(1) or real(*a))
    otk.transform(X)
    assert seen and _threads._depth == 0
    with pytest.raises(ValueError, match="at most 65536"):
        skset.set_config(n_threads=2**31)
    with pytest.raises(ValueError, match="positive integer"):
        skset.set_config(n_threads="²")


def test_scopes_in_two_threads_set_each_threads_count():
    """Two threads' calls at once: each runs on its own count (only the first was scoped), and
    the pools come back only when the last scope closes."""
    import threading

    import skset
    from skset import _threads

    started, release, seen = threading.Barrier(2), threading.Event(), {}

    def call(name):
        with _threads.call_scope(work=1):
            started.wait(5)
            seen[name] = torch.get_num_threads()
            release.wait(5)

    with skset.config_context(n_threads=1):
        threads = [threading.Thread(target=call, args=(n,)) for n in "AB"]
        for t in threads:
            t.start()
        release.set()
        for t in threads:
            t.join(10)
    assert seen == {"A": 1, "B": 1}
    assert _threads._depth == 0 and _threads._saved_pools is None


def test_config_blocks_in_threads_need_not_nest():
    """Blocks of two threads that exit out of order leave the setting as before both (one
    block's exit restored the other's snapshot: 1 for good)."""
    import skset

    before = skset.get_config()["n_threads"]
    a = skset.config_context(n_threads=1)
    b = skset.config_context(n_threads=2)
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)  # the older block leaves first: the newer one still holds
    assert skset.get_config()["n_threads"] == 2
    b.__exit__(None, None, None)
    assert skset.get_config()["n_threads"] == before
    with skset.config_context(n_threads=3):
        skset.set_config(n_threads=4)  # inside a block that set it: until the block exits
        assert skset.get_config()["n_threads"] == 4
    assert skset.get_config()["n_threads"] == before


def test_skset_num_threads_auto_is_the_default(monkeypatch):
    """``SKSET_NUM_THREADS=auto`` behaves as unset (it turned the load adaptation off)."""
    from skset import _threads

    for var in _threads.THREAD_ENV:
        monkeypatch.delenv(var, raising=False)
    assert not _threads.user_thread_env()
    monkeypatch.setenv("SKSET_NUM_THREADS", "auto")
    assert not _threads.user_thread_env()
    monkeypatch.setenv("SKSET_NUM_THREADS", "2")
    assert _threads.user_thread_env()


def test_networks_built_in_threads_are_the_networks_of_their_seeds():
    # fits in threads (joblib's threading backend) reseeded torch's one generator side by side:
    # a network of random_state=0 built beside another came out different in 17 of 20 tries
    import threading

    from skset.neural_network._base import BaseNeuralEstimator

    def build():
        return torch.cat([torch.nn.Linear(32, 32).weight.detach().flatten() for _ in range(20)])

    ref = {s: BaseNeuralEstimator._seeded(s, build) for s in (0, 1)}
    wrong = []

    def work(seed):
        for _ in range(15):
            if not torch.equal(BaseNeuralEstimator._seeded(seed, build), ref[seed]):
                wrong.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_dropout_fits_in_threads_are_those_run_alone():
    # the masks come from a generator of each fit (not torch's global one, which fits in threads
    # reseeded side by side), and no lock holds one fit's training against another's
    import threading
    import warnings

    from skset import SetTransformerClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 8)), 3)) for _ in range(40)]
    y = np.arange(40) % 2
    kw = dict(hidden_size=8, n_heads=2, n_layers=1, dropout=0.2, max_iter=3, device="cpu")
    warnings.simplefilter("ignore")
    alone = {s: SetTransformerClassifier(random_state=s, **kw).fit(X, y).predict_proba(X) for s in (0, 1)}
    got = {}

    def fit(s):
        got[s] = SetTransformerClassifier(random_state=s, **kw).fit(X, y).predict_proba(X)

    threads = [threading.Thread(target=fit, args=(s,)) for s in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in (0, 1):
        np.testing.assert_array_equal(got[s], alone[s])
