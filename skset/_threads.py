"""The thread policy of skset's own calls (``skset.set_config(n_threads=...)``).

Every public method of a skset estimator that computes (``fit``, ``transform``, ``predict``...)
runs inside :func:`call_scope`. The outermost scope of a call:

* runs the native pools that ``threadpoolctl`` finds besides torch's (numpy's and scipy's
  OpenBLAS, scikit-learn's OpenMP: skset's k-means, distances and small linear algebra) on one
  thread. Their work inside skset is small; on a machine where other processes run, their threads
  wait for each other on every call. Their results then also no longer depend on the thread
  setting (scikit-learn's k-means sums per thread);
* gives torch ``threads_for(work)`` intra-op threads: one for work below ``SMALL_WORK``
  (elements x width of the call: threads cannot pay off there), otherwise the usable cores
  (the process's CPU affinity and cgroup CPU quota, at most torch's own count, so
  ``torch.set_num_threads``, ``OMP_NUM_THREADS`` and :func:`skset.utils.limit_threads` bound it),
  or the count set with ``skset.set_config(n_threads=k)``;
* restores every count on exit.

With the default ``n_threads="auto"`` and no thread variable in the environment
(``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``...), the outermost scope also
looks at the machine (:func:`machine_busy`: CPU pressure from ``/proc/pressure/cpu``, else the
load average against the usable cores). While other processes keep the cores busy, and always on
a machine of at most ``FEW_CORES`` usable cores, numpy's and scipy's BLAS pools stay on one
thread between skset's calls too (the scikit-learn model after skset in a pipeline runs its
small BLAS calls on one thread); once a larger machine is idle again they get their previous
counts back. Torch's threads do not follow the load: the large calls that
get them split their work into a few big pieces (:func:`skset._torch.map_on_threads`), which
still pay off on a busy machine, and the training of networks would change its rounding with them.

The engine layer: no scikit-learn, no estimator module.
"""

from __future__ import annotations

import functools
import math
import os
import pickle
import sys
import threading
import time
from contextlib import contextmanager, nullcontext

import torch

#: elements x width of a call below which it runs torch on one thread
SMALL_WORK = 1 << 21
#: a training batch counts this many times its elements x width against ``SMALL_WORK`` (forward
#: and backward passes). Measured on 2 idle cores, one epoch of 512 sets x 8 features
#: (``hidden_size=64``, batches of 64 sets): at 10-60 elements per set (1.6e5 per batch) one
#: thread was faster (Set Transformer 0.50-0.58 s against 0.64-0.78 s on two), at 50-300
#: (7.1e5) two threads (1.55-1.83 s against 2.21-2.25 s; Deep Sets 0.22-0.26 against 0.28-0.33)
TRAINING_WORK_FACTOR = 4
#: usable cores up to which numpy's and scipy's BLAS pools stay on one thread between skset's
#: calls even on an idle machine (2 cores: scikit-learn's LogisticRegression in the README's
#: main job fitted 1.1-4x slower on two OpenBLAS threads than on one, at 2e5-2e7 input values,
#: while a large matrix product gains at most 2x)
FEW_CORES = 2
#: CPU pressure (percent of the last 10 s in which some task waited for a CPU) above which the
#: machine counts as busy
BUSY_PRESSURE = 20.0
#: environment variables that mean the user chose thread counts: skset then leaves the pools
#: outside its calls alone and never adapts to the load
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
              "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "SKSET_NUM_THREADS")
#: warnings point at the first frame outside this directory (:func:`user_stacklevel`)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: the public methods that :class:`skset._base.SksetEstimator` runs inside :func:`call_scope`
SCOPED_METHODS = frozenset({
    "fit", "partial_fit", "transform", "fit_transform", "predict", "predict_proba",
    "predict_log_proba", "decision_function", "score", "fit_predict", "transport_plan",
    "affinity", "attention_weights", "inverse_transform",
})

_lock = threading.RLock()
_state = threading.local()
_depth = 0  # outermost scopes open in the whole process (any thread)
_user_limits = 0  # skset.utils.limit_threads blocks open: the user's counts win
_saved_pools: list | None = None  # [(controller, count)] while a scope is open in any thread
_controller = None
_controller_modules = -1
_outside_saved: dict | None = None  # {library filepath: count} while outside pools are lowered
_busy_cache = (-1.0, False)


# -- the machine -----------------------------------------------------------------------------------
def _cgroup_cpus() -> float | None:
    """CPUs allowed by the cgroup CPU quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), or None."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            return int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as fh:
            quota = int(fh.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as fh:
            period = int(fh.read())
        if quota > 0 and period > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return None


@functools.lru_cache(maxsize=1)
def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``os.sched_getaffinity``), capped by
    the cgroup CPU quota (rounded up), else ``os.cpu_count()``; at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = _cgroup_cpus()
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)


def _cpu_pressure() -> float | None:
    try:
        with open("/proc/pressure/cpu") as fh:
            for line in fh:
                if line.startswith("some"):
                    return float(line.split("avg10=")[1].split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine_busy(max_age: float = 1.0) -> bool:
    """Whether other work competes for this process's cores: CPU pressure ``some avg10`` of
    ``/proc/pressure/cpu`` above ``BUSY_PRESSURE`` percent, else (no pressure file) a 1-minute
    load average of at least the usable cores + 1. Read at most once per ``max_age`` seconds."""
    global _busy_cache
    now = time.monotonic()
    if now - _busy_cache[0] < max_age:
        return _busy_cache[1]
    pressure = _cpu_pressure()
    if pressure is not None:
        busy = pressure >= BUSY_PRESSURE
    else:
        try:
            busy = os.getloadavg()[0] >= usable_cores() + 1
        except (AttributeError, OSError):
            busy = False
    _busy_cache = (now, busy)
    return busy


def user_thread_env() -> bool:
    """Whether one of ``THREAD_ENV`` is set (the user chose thread counts; ``SKSET_NUM_THREADS``
    set to ``auto`` is skset's default, as unset)."""
    return any(os.environ.get(k, "").strip() and not (
        k == "SKSET_NUM_THREADS" and os.environ[k].strip().lower() == "auto") for k in THREAD_ENV)


# -- the policy ------------------------------------------------------------------------------------
def _setting():
    from ._config import _config

    return _config["n_threads"]


def adaptive() -> bool:
    """The default policy with no thread variable set: skset may adapt to the machine's load."""
    return _setting() == "auto" and not user_thread_env() and _user_limits == 0


def threads_for(work: float | None, cap: int | None = None) -> int:
    """Torch intra-op threads for a call of ``work`` elements x width (None: unknown, large).

    ``n_threads=k`` (``set_config``): ``k``. ``"auto"``: 1 below ``SMALL_WORK``, else the usable
    cores, at most ``cap`` (torch's count before the call)."""
    cap = torch.get_num_threads() if cap is None else cap
    setting = _setting()
    if setting != "auto":
        return int(setting)
    if work is not None and work < SMALL_WORK:
        return 1
    return max(1, min(cap, usable_cores()))


def _pools():
    """The ``threadpoolctl`` controllers of the pools besides torch's, cached (found again when
    modules were imported since: a library loaded later is then seen)."""
    global _controller, _controller_modules
    if _controller is None or len(sys.modules) != _controller_modules:
        from threadpoolctl import ThreadpoolController

        torch_dir = os.path.realpath(os.path.dirname(torch.__file__))
        _controller = [c for c in ThreadpoolController().lib_controllers
                       if not os.path.realpath(c.filepath).startswith(torch_dir)]
        _controller_modules = len(sys.modules)
    return _controller


def _set_outside(busy: bool) -> None:
    """Lower numpy's and scipy's BLAS pools to one thread while ``busy``; give them back their
    counts once not (only where a count is still the one skset set)."""
    global _outside_saved
    blas = [c for c in _pools() if c.user_api == "blas"]
    if busy and _outside_saved is None:
        _outside_saved = {c.filepath: c.num_threads for c in blas}
        for c in blas:
            c.set_num_threads(1)
    elif not busy and _outside_saved is not None:
        for c in blas:
            if c.filepath in _outside_saved and c.num_threads == 1:
                c.set_num_threads(_outside_saved[c.filepath])
        _outside_saved = None


def _enter(work):
    """Open one thread's outermost scope: the native pools (process-wide) lowered by the first
    scope open in any thread, this thread's torch count set (torch counts per thread). Returns
    this thread's torch count before. A failure or an interrupt on the way undoes what was done."""
    global _depth, _saved_pools
    with _lock:
        cap = torch.get_num_threads()
        _depth += 1
        try:
            if _depth == 1:  # the first scope open in the process: the pools besides torch's
                if adaptive():
                    _set_outside(usable_cores() <= FEW_CORES or machine_busy())
                elif _outside_saved is not None and _user_limits == 0:
                    _set_outside(False)  # an explicit setting now: the lowered pools given back
                _saved_pools = [(c, c.num_threads) for c in _pools()]
                for c, n in _saved_pools:
                    if n != 1:
                        c.set_num_threads(1)
            torch.set_num_threads(threads_for(work, cap))
        except BaseException:
            _leave(cap)
            raise
        return cap


def _leave(cap):
    """Close one thread's scope: its torch count back to ``cap``; the pools back to their counts
    when it was the last scope open in the process."""
    global _depth, _saved_pools
    if torch.get_num_threads() != cap:
        torch.set_num_threads(cap)
    _depth -= 1
    if _depth == 0 and _saved_pools is not None:
        for c, n in _saved_pools:
            if c.num_threads != n:
                c.set_num_threads(n)
        _saved_pools = None


def _exit(cap):
    with _lock:
        _leave(cap)


def user_pool_limits() -> None:
    """The pools' counts are now the user's for good (:func:`skset.utils.set_worker_threads`):
    the counts skset saved before lowering them between its calls are dropped, never given back."""
    global _outside_saved
    with _lock:
        _outside_saved = None


def worker_thread_init() -> None:
    """The start of a worker thread of skset's own (:func:`skset._torch.map_on_threads`): one
    intra-op thread, and inside the caller's scope (a skset call it makes changes no count)."""
    torch.set_num_threads(1)
    _state.inside = True


@contextmanager
def call_scope(work=None):
    """Run one skset call under the policy (module docstring); scopes inside it change nothing."""
    if getattr(_state, "inside", False):
        yield
        return
    _state.inside = True
    try:
        saved = _enter(work)
        try:
            yield
        finally:
            _exit(saved)
    finally:
        _state.inside = False


@contextmanager
def one_thread():
    """Torch's OpenMP pool on one thread inside the block: scikit-learn's OpenMP code (k-means)
    runs on it where torch was imported first (its ``omp_*`` symbols then bind to torch's
    ``libgomp``), and its sums per thread would make the result depend on the count."""
    n = torch.get_num_threads()
    if n == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


@contextmanager
def user_limits():
    """Inside :func:`skset.utils.limit_threads`: the user's counts, no adaptation to the load."""
    global _user_limits
    with _lock:
        _user_limits += 1
    try:
        yield
    finally:
        with _lock:
            _user_limits -= 1


def set_work_size(X, width: int | None = None) -> float | None:
    """Elements x width of a collection of sets (a list of arrays, a padded array, a data frame):
    the width is the sets' features, or ``width`` when larger (a network's hidden size); None
    when it cannot tell. A list's elements are estimated from up to 64 of its sets."""
    if isinstance(X, (list, tuple)):
        n = len(X)
        if n == 0:
            return 0.0
        sample = X[:: max(1, n // 64)]
        shapes = [getattr(s, "shape", None) for s in sample]
        if any(s is None or len(s) == 0 for s in shapes):
            return None
        elements = sum(s[0] for s in shapes) * n / len(sample)
        features = shapes[0][-1] if len(shapes[0]) > 1 else 1
    else:
        shape = getattr(X, "shape", None)
        if shape is None or len(shape) < 2 or not all(isinstance(s, int) for s in shape):
            return None
        elements, features = math.prod(shape[:-1]), shape[-1]
    return float(elements) * max(int(features), int(width or 0))


#: frames of other libraries that call skset on the user's behalf: scikit-learn's mixins
#: (``TransformerMixin.fit_transform``...) and ``set_output`` wrapper, joblib's unpickler and the
#: pure-Python one it runs on (``joblib.load`` runs ``__setstate__``)
_WRAPPER_FILES = (os.path.join("sklearn", "base.py"), os.path.join("sklearn", "utils", "_set_output.py"),
                  os.path.join("joblib", "numpy_pickle"), os.path.abspath(pickle.__file__))


def _calls_for_user(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE_DIR) or any(w in path for w in _WRAPPER_FILES)


def user_stacklevel() -> int:
    """The ``stacklevel`` at which a warning raised by the caller of this function points at the
    first frame outside skset and the wrappers that call it (``_WRAPPER_FILES``): the user's line,
    however many of their frames lie between (``partial_fit`` through ``fit``, ``fit`` through
    ``_fit``, the scope's wrapper, scikit-learn's mixins and ``set_output`` wrapper)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and _calls_for_user(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def scoped(method, context=None):
    """``method`` (of an estimator) run inside :func:`call_scope` with the work of its input, and
    inside ``context(estimator)`` too when given (the caller's other policy for the method, in
    the same frame). Its warnings find the user's frame with :func:`user_stacklevel`."""
    extra = (lambda est: nullcontext()) if context is None else context

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if getattr(_state, "inside", False):
            with extra(self):
                return method(self, *args, **kwargs)
        X = args[0] if args else kwargs.get("X")
        try:
            work = self._thread_work(method.__name__, X)
        except Exception:  # an invalid input: the method raises its own error
            work = None
        with call_scope(work), extra(self):
            return method(self, *args, **kwargs)

    wrapper._skset_scoped = True
    return wrapper
