"""Global configuration of skset: :func:`set_config`, :func:`get_config`, :func:`config_context`.

Like scikit-learn's, but process-wide: the setting applies to every thread of the process (skset
runs batches on worker threads, which must see the caller's setting), so a
:func:`config_context` in one thread is seen by the others while it lasts. Blocks in several
threads need not exit in the reverse order of their entry: each block's values leave when it
exits, and the newest block still open wins. Worker processes (joblib's default ``loky``
backend, dask worker processes) start with the defaults: there, set the environment variables
``SKSET_NUM_THREADS`` / ``SKSET_COMPILE`` before they start.
"""

from __future__ import annotations

import numbers
import os
import threading
from contextlib import contextmanager

__all__ = ["config_context", "get_config", "set_config"]

def _compile_from_env() -> bool:
    """The default of ``compile``: ``SKSET_COMPILE=1`` (or ``true``) turns it on."""
    return os.environ.get("SKSET_COMPILE", "0").strip().lower() in ("1", "true", "yes", "on")


#: the most threads ``n_threads`` takes (torch's count is a C int; far above any machine's cores)
MAX_THREADS = 1 << 16


def _check_n_threads(value, source="n_threads"):
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):  # numpy's too
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_THREADS:
        raise ValueError(f"{source} must be 'auto' or a positive integer (at most "
                         f"{MAX_THREADS}), got {value!r}")
    return int(value)


def _n_threads_from_env():
    """The default of ``n_threads``: ``SKSET_NUM_THREADS`` when set, else ``"auto"``."""
    value = os.environ.get("SKSET_NUM_THREADS", "").strip()
    return _check_n_threads(value, "SKSET_NUM_THREADS") if value else "auto"


_base = {"compile": _compile_from_env(), "n_threads": _n_threads_from_env()}  # set_config's
#: the open config_context blocks, oldest first: ``[(token, {setting: value})]``
_blocks: list[tuple[object, dict]] = []
_config = dict(_base)  # in force: the base updated by the open blocks in order (what skset reads)
_lock = threading.Lock()


def _refresh() -> None:
    effective = dict(_base)
    for _, values in _blocks:
        effective.update(values)
    _config.update(effective)


def _check_compile(value):
    if not isinstance(value, bool):
        raise ValueError(f"compile must be True or False, got {value!r}")
    return value


def get_config() -> dict:
    """The current values of skset's global settings (a copy).

    Returns
    -------
    config : dict
        ``{"compile": bool, "n_threads": "auto" or int}``; see :func:`set_config`.

    Examples
    --------
    >>> import skset
    >>> skset.get_config()["compile"]
    False
    """
    return dict(_config)


def set_config(compile=None, n_threads=None) -> None:
    """Set skset's global settings; ``None`` leaves a setting as it is.

    Parameters
    ----------
    compile : bool or None, default=None
        Run the OTK embedding through ``torch.compile``: :meth:`skset.OTKEmbedding.transform`
        (and ``fit``'s mean embedding) and the forward pass of the networks of
        :class:`skset.OTKClassifier` / :class:`skset.OTKRegressor` without autograd (their
        prediction). The engine layers do not read it: :class:`skset.nn.OTKLayer` and
        :func:`skset.nn.otk_embed` take ``compile=True`` as an argument. The similarity, Gibbs
        kernel, Sinkhorn iterations and pooling run as fused kernels: same results to float
        rounding (1e-5), faster per call once compiled (on two CPU threads: up to 6x at small
        ``epsilon``, where the plans run in the log domain, 1.0-1.2x at a few exp-domain
        iterations, where the matrix products dominate; see the OTK user guide), but the first
        call in a process pays the compilation (about 20 s; about 5 s once torch's on-disk cache
        holds the kernels). Variable set sizes and batch sizes reuse the same compiled kernels
        (dynamic shapes). Where compiling fails (no C++ compiler, an unsupported platform) skset
        warns once (:class:`skset.CompileWarning`) and runs the eager code. Default ``False``, or
        ``True`` when the environment variable
        ``SKSET_COMPILE=1`` is set at import.
    n_threads : "auto" or int, default=None
        Threads of skset's own calls (every ``fit``, ``transform``, ``predict``... of a skset
        estimator). Inside such a call, numpy's, scipy's and scikit-learn's thread pools (k-means,
        distances, small linear algebra) run on one thread, so their results do not depend on this
        setting, and torch runs on:

        * ``"auto"`` (the default): one thread for a call of less than ``2**21`` elements x width
          (elements of the input sets times their features, or the network's width), where
          threads cannot pay off; otherwise the usable cores: the process's CPU affinity
          (``os.sched_getaffinity``) capped by its cgroup CPU quota, and at most torch's own count
          (``torch.set_num_threads``, ``OMP_NUM_THREADS``, :func:`skset.utils.limit_threads`).
          When no thread variable is set in the environment (``OMP_NUM_THREADS``,
          ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``...), skset also adapts to other work on
          the machine (CPU pressure in ``/proc/pressure/cpu``, else the load average): while
          other processes keep the cores busy, numpy's and scipy's BLAS pools stay on one
          thread between skset's calls too (a scikit-learn model after skset in a pipeline
          makes many small BLAS calls, whose threads wait for each other on a busy machine);
          once the machine is idle again they get their previous counts back. Torch's count
          follows the size rule only, never the load: the fits and transforms of
          ``NystromFeatures`` and ``OTKEmbedding`` are bit-identical whatever the number of
          threads, the training of neural networks is not.
        * an int ``k``: torch runs skset's calls on ``k`` threads whatever their size and the
          load, inside :func:`skset.utils.limit_threads` too (an explicit count wins over its
          limit); the pools outside skset's calls are left alone.

        Default ``"auto"``, or the value of the environment variable ``SKSET_NUM_THREADS`` at
        import. Measured in ``benchmarks/results/threads.md``.

    Examples
    --------
    >>> import skset
    >>> skset.set_config(compile=False)
    >>> skset.get_config()
    {'compile': False, 'n_threads': 'auto'}
    """
    with _lock:
        if compile is not None:
            compile = _check_compile(compile)
        if n_threads is not None:
            n_threads = _check_n_threads(n_threads)
        for key, value in (("compile", compile), ("n_threads", n_threads)):
            if value is None:
                continue
            # inside a block that set it, the value lasts until that block exits (scikit-learn's)
            holder = next((v for _, v in reversed(_blocks) if key in v), _base)
            holder[key] = value
        _refresh()


@contextmanager
def config_context(*, compile=None, n_threads=None):
    """Context manager that sets skset's global settings (see :func:`set_config`) and restores
    the previous values on exit.

    Examples
    --------
    >>> import skset
    >>> with skset.config_context(compile=True):
    ...     skset.get_config()["compile"]
    True
    >>> skset.get_config()["compile"]
    False
    """
    values = {}
    if compile is not None:
        values["compile"] = _check_compile(compile)
    if n_threads is not None:
        values["n_threads"] = _check_n_threads(n_threads)
    token = object()
    with _lock:
        _blocks.append((token, values))
        _refresh()
    try:
        yield
    finally:  # this block's values leave, wherever it is in the stack (threads need not nest)
        with _lock:
            _blocks[:] = [b for b in _blocks if b[0] is not token]
            _refresh()
