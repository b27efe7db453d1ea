"""The one base of every skset estimator.

:class:`SksetEstimator` is scikit-learn's ``BaseEstimator`` plus what every skset estimator
shares, in one class (no mixins: the trained estimators' base, :mod:`skset.neural_network._base`,
stays at 8 classes in its method resolution order):

* the check of the parameters against the class's ``_parameter_constraints`` table
  (:mod:`skset._validation`) and of the relations between them, called by :meth:`_begin_fit`;
* the loading of models saved under older parameter names (``_renamed_params``) or before a
  parameter existed (``_legacy_params``), in pickles and :func:`skset.load`;
* pickling with every tensor, module and optimizer state on the CPU, and back on the fitted
  device when it is available here (otherwise on the CPU, with a warning): a model fitted on a
  GPU loads on a CPU-only machine;
* :meth:`_begin_fit`, the start of every ``fit`` of a torch-backed estimator: parameters checked,
  ``device_`` and ``dtype_`` resolved, random streams drawn;
* the fits (``fit``, ``partial_fit``, ``fit_transform``, ``fit_predict``) run with autograd on,
  also when called inside ``torch.no_grad()`` or ``torch.inference_mode()``;
* :meth:`_check_columns`: sets given as data frames keep their column names
  (``feature_names_in_``), and sets of other columns are refused.
"""

from __future__ import annotations

import contextlib
import inspect
import types
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator

from ._frames import set_columns
from ._threads import SCOPED_METHODS, TRAINING_WORK_FACTOR, scoped, set_work_size, user_stacklevel
from ._torch import _to_cpu, _to_device, random_streams, resolve_device, resolve_dtype
from ._validation import InvalidParameterError, check_params

__all__ = ["SksetEstimator", "set_input_tags"]


def set_input_tags(tags, dtype: str | None = None, *, pool: bool = False):
    """scikit-learn's tags of an estimator of collections of sets: 3-D arrays (sets of one
    size) accepted, 2-D ones only with ``pool`` (read as one pool of elements); a transformer's
    output keeps ``dtype``. Returns ``tags``."""
    tags.input_tags.two_d_array = pool
    tags.input_tags.three_d_array = True
    if dtype is not None:
        tags.transformer_tags.preserves_dtype = [dtype]
    return tags


_TRAINING_METHODS = frozenset({"fit", "partial_fit", "fit_transform", "fit_predict"})


@contextlib.contextmanager
def _training_call(est):
    """A fit's policy: autograd on, whatever the caller's mode (a fit called inside
    ``torch.no_grad()`` or ``torch.inference_mode()`` trains as anywhere else: the tensors it
    keeps are ordinary ones); and a fit that raises leaves ``est`` as it was before the call
    (its attributes put back: no half-written model, whose new ``n_features_in_`` or ``window_``
    no longer describe its references or network; what the fit changed in place, a network
    trained by ``partial_fit`` or ``warm_start`` before an error, stays changed). An interrupt
    (``KeyboardInterrupt``) restores it too: a refit stopped by the user keeps the model before."""
    saved = dict(vars(est))
    with torch.inference_mode(False), torch.enable_grad():
        try:
            yield
        except BaseException:
            vars(est).clear()
            vars(est).update(saved)
            raise


class SksetEstimator(BaseEstimator):
    """Parameter checks, legacy parameters, CPU pickling and the start of a fit; see the module
    docstring. Each subclass writes its own ``__init__`` (keyword arguments stored unchanged)."""

    #: ``{name: [allowed, ...]}`` of every constructor parameter (see :mod:`skset._validation`)
    _parameter_constraints: dict[str, list] = {}
    #: ``{old name: new name}`` of renamed parameters: models pickled or saved with
    #: :func:`skset.save` before a rename still load
    _renamed_params: dict[str, str] = {}
    #: ``{name: value}`` of parameters added after models were saved, with the value that gives
    #: those models' behaviour (a model saved without ``input_similarity`` had none)
    _legacy_params: dict[str, object] = {}
    #: attributes kept on the CPU once loaded (an optimizer ``state_dict``: ``load_state_dict``
    #: puts it on the parameters' device when training resumes, and Adam's ``step`` counters must
    #: stay on the CPU)
    _cpu_attributes = frozenset({"_optimizer_state"})
    #: what one row of the output describes: ``"set"`` (one row per set, as every set-level
    #: estimator) or ``"element"`` (one row per element of each set, ``NystromFeatures``); read
    #: by :func:`skset._steps.output_rows` (:mod:`skset.distributed` needs one row per set)
    _output_rows = "set"

    def __init_subclass__(cls, **kwargs):
        """Run every public method that computes (``fit``, ``transform``, ``predict``...) under
        skset's thread policy (:mod:`skset._threads`, ``skset.set_config(n_threads=...)``)."""
        super().__init_subclass__(**kwargs)
        for name in SCOPED_METHODS:
            # the class's own methods and those it inherits from mixins (the networks' predict,
            # scikit-learn's score): a plain function anywhere in the MRO not yet wrapped
            method = inspect.getattr_static(cls, name, None)
            if isinstance(method, types.FunctionType) and not getattr(method, "_skset_scoped",
                                                                          False):
                setattr(cls, name, scoped(method, _training_call if name in _TRAINING_METHODS
                                          else None))

    def __sklearn_tags__(self):
        """``non_deterministic`` where the model computes on a GPU (or another accelerator):
        there a fit of one ``random_state`` agrees with another to rounding, not bit for bit
        (CUDA's parallel sums change order); on the CPU every skset fit is repeatable."""
        tags = super().__sklearn_tags__()
        try:
            tags.non_deterministic = resolve_device(self.device).type != "cpu"
        except (AttributeError, ValueError):  # no device parameter, or one this machine lacks
            pass
        return tags

    def _check_columns(self, X, fitting: bool) -> None:
        """Sets given as data frames (a list of pandas or polars frames): on a fit, their column
        names become ``feature_names_in_`` (removed when the sets have none); a later call
        refuses sets of other columns (:func:`skset._frames.set_columns`)."""
        if hasattr(X, "columns") and len(getattr(X, "shape", ())) == 2:
            X = [X]  # one frame (a pool of elements): its columns read as a list's
        elif hasattr(X, "to_numpy") and getattr(X, "ndim", None) == 1:
            X = X.to_numpy()  # a Series of sets: read as check_sets reads it, an object array
        if isinstance(X, np.ndarray) and X.dtype == object and X.ndim == 1:
            X = list(X)  # a 1-D object array of sets: its frames' columns are read as a list's
        if not isinstance(X, (list, tuple)):
            names = None  # arrays: read by position
        else:
            names = set_columns(list(X), "X", None if fitting
                                else getattr(self, "feature_names_in_", None))
        if fitting and names is not None:
            self.feature_names_in_ = names
        elif fitting:
            self.__dict__.pop("feature_names_in_", None)

    def _thread_work(self, method: str, X) -> float | None:
        """The size of a call for the thread policy: elements x width of ``X`` (the sets'
        features, or the network's ``hidden_size`` when larger); for a training call
        (``fit``, ``partial_fit`` with a ``batch_size``), the share of one batch (the work
        between two synchronisations of the threads) times ``TRAINING_WORK_FACTOR`` (a
        forward and a backward pass)."""
        work = set_work_size(X, getattr(self, "hidden_size", None))
        batch = getattr(self, "batch_size", None)
        if (work is not None and method in ("fit", "partial_fit") and isinstance(batch, int)
                and hasattr(X, "__len__") and len(X) > batch):
            work *= batch / len(X) * TRAINING_WORK_FACTOR
        return work

    # -- parameters -------------------------------------------------------------------------------
    def _check_params(self) -> None:
        """Check every parameter against the table, then the relations between them."""
        check_params(self)
        self._check_param_relations()

    def _check_param_relations(self) -> None:
        """Checks that involve several parameters; raise :class:`InvalidParameterError`."""

    def _param_error(self, message: str) -> InvalidParameterError:
        return InvalidParameterError(f"{type(self).__name__}: {message}")

    @classmethod
    def _upgrade_params(cls, params: dict) -> dict:
        """``params`` (or a pickled ``__dict__``) with renamed parameters under their new names
        and parameters added since, which the saved model did not have, at their legacy value."""
        out = {cls._renamed_params.get(k, k): v for k, v in params.items()}
        for k, v in cls._legacy_params.items():
            out.setdefault(k, v)
        return out

    # -- the start of a fit -----------------------------------------------------------------------
    def _begin_fit(self) -> tuple[int, np.random.RandomState]:
        """Check the parameters, set ``device_`` and ``dtype_``; return ``(seed, rng)``."""
        self._check_params()
        vars(self).pop("_state_version", None)  # a model loaded from another version, refitted
        self.device_ = resolve_device(self.device)
        self.dtype_ = resolve_dtype(self._compute_dtype())
        return random_streams(self.random_state)

    def _compute_dtype(self) -> str:
        """The name of the dtype a fit computes in: the ``dtype`` parameter (an estimator that has
        none says which here)."""
        return self.dtype

    def _check_warm_dtype(self, fitted, how: str = "partial_fit") -> None:
        """A call that continues the fitted model (``partial_fit``, ``warm_start``) computes in
        the fitted dtype ``fitted``: a ``dtype`` changed since the fit (``set_params``) is
        refused here, before anything changes."""
        self._check_params()
        now = resolve_dtype(self._compute_dtype())
        was = resolve_dtype(fitted)
        if now != was:
            name = str(was).replace("torch.", "")
            raise ValueError(
                f"{type(self).__name__}: dtype={self._compute_dtype()!r} differs from the dtype "
                f"the model was fitted in ({name!r}); {how} continues the fitted model: set "
                f"dtype={name!r} back, or call fit to start afresh in the new dtype.")

    # -- pickling ---------------------------------------------------------------------------------
    def __getattr__(self, name):
        """Reached only when an attribute is missing: on a model that :func:`skset.load` read
        with ``strict_version=False`` from another skset version (``_state_version``), a fitted
        attribute this version reads is named with where the model came from."""
        if any(name in vars(c) for c in type(self).__mro__):  # a property that raised inside:
            return object.__getattribute__(self, name)  # its own error, not one naming it
        saved = vars(self).get("_state_version")
        if saved is not None and name.endswith("_") and not name.startswith("__"):
            raise AttributeError(
                f"{type(self).__name__} has no attribute {name!r} (the model was loaded with "
                f"strict_version=False from a file written by skset {saved}: where this "
                "version's methods need it, refit the model with this version).")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getstate__(self):
        state = {k: _to_cpu(v) for k, v in self.__dict__.items()}
        if "device_" in state:
            state["device_"] = str(state["device_"])
        return state

    def __setstate__(self, state):
        state = self._upgrade_params(state)
        for k in self._legacy_params:  # skset.load sets the parameters before the state
            if k in self.__dict__:
                state.pop(k, None)
        dev = state.get("device_")
        target = torch.device("cpu")
        if dev is not None:
            dev = torch.device(dev)
            available = dev.type == "cpu" or (dev.type == "cuda" and torch.cuda.is_available() and (
                dev.index is None or dev.index < torch.cuda.device_count()))  # cuda:1 on one GPU
            if available:
                target = dev
            else:
                warnings.warn(
                    f"{type(self).__name__} was fitted on {dev}, which is not available here; "
                    "it is loaded on the CPU.",
                    UserWarning,
                    stacklevel=user_stacklevel(),
                )
            state["device_"] = target
        for k, v in state.items():  # (also: ordinary tensors where it is loaded in inference mode)
            state[k] = _to_device(v, torch.device("cpu") if k in self._cpu_attributes else target)
        self.__dict__.update(state)
