"""Global configuration of skset: :func:`set_config`, :func:`get_config`, :func:`config_context`.

Like scikit-learn's, but process-wide: the setting applies to every thread of the process (skset
runs batches on worker threads, which must see the caller's setting), so a
:func:`config_context` in one thread is seen by the others while it lasts.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

__all__ = ["config_context", "get_config", "set_config"]

def _compile_from_env() -> bool:
    """The default of ``compile``: ``SKSET_COMPILE=1`` (or ``true``) turns it on."""
    return os.environ.get("SKSET_COMPILE", "0").strip().lower() in ("1", "true", "yes", "on")


_config = {"compile": _compile_from_env()}
_lock = threading.Lock()


def _check_compile(value):
    if not isinstance(value, bool):
        raise ValueError(f"compile must be True or False, got {value!r}")
    return value


def get_config() -> dict:
    """The current values of skset's global settings (a copy).

    Returns
    -------
    config : dict
        ``{"compile": bool}``; see :func:`set_config`.

    Examples
    --------
    >>> import skset
    >>> skset.get_config()["compile"]
    False
    """
    return dict(_config)


def set_config(compile=None) -> None:
    """Set skset's global settings; ``None`` leaves a setting as it is.

    Parameters
    ----------
    compile : bool or None, default=None
        Run the OTK embedding through ``torch.compile``: :meth:`skset.OTKEmbedding.transform`
        (and ``fit``'s mean embedding) and the forward pass of :class:`skset.nn.OTKLayer` without
        autograd (hence the prediction of :class:`skset.OTKClassifier` /
        :class:`skset.OTKRegressor`). The similarity, Gibbs kernel, Sinkhorn iterations and
        pooling run as fused kernels: same results to float rounding (1e-5), faster per call once
        compiled (on two CPU threads: up to 6x at small ``epsilon``, where the plans run in the
        log domain, 1.0-1.2x at a few exp-domain iterations, where the matrix products dominate;
        see the OTK user guide), but the first call in a process pays the compilation (about
        20 s; about 5 s once torch's on-disk cache holds the kernels). Variable set sizes and
        batch sizes reuse the same compiled kernels (dynamic shapes). Where compiling fails (no
        C++ compiler, an unsupported platform) skset warns once (:class:`skset.CompileWarning`)
        and runs the eager code. Default ``False``, or ``True`` when the environment variable
        ``SKSET_COMPILE=1`` is set at import.

    Examples
    --------
    >>> import skset
    >>> skset.set_config(compile=False)
    >>> skset.get_config()
    {'compile': False}
    """
    with _lock:
        if compile is not None:
            _config["compile"] = _check_compile(compile)


@contextmanager
def config_context(*, compile=None):
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
    old = get_config()
    set_config(compile=compile)
    try:
        yield
    finally:
        set_config(**old)
