"""One table of parameter specifications per estimator, one checker, one generated ``__init__``.

Every skset estimator declares its constructor parameters once, as a class attribute
``_params``: an ordered ``{name: Param(default, *allowed)}`` table. From it

* :class:`ParamsMixin` generates ``__init__`` (a real signature, read by ``get_params``,
  ``clone``, ``repr``, ``help()`` and Jupyter: the first ``positional`` parameters may be given by
  position, the others by keyword only, as in scikit-learn), which stores every argument
  unchanged;
* :meth:`ParamsMixin._check_params`, called at the start of ``fit``, checks every value against
  its specification and raises :class:`InvalidParameterError` (a ``ValueError`` and a
  ``TypeError``) that names the estimator, the parameter, the value and what is allowed; relations
  between parameters (``hidden_size`` divisible by ``n_heads``) go in
  :meth:`ParamsMixin._check_param_relations`.

Tables shared by several estimators (the training parameters of the neural estimators, the
device and dtype) are plain dicts merged into each estimator's table, so that a parameter has one
name, one default and one specification wherever it appears.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable

import numpy as np
import torch

__all__ = [
    "InvalidParameterError",
    "Param",
    "Integer",
    "Real",
    "Options",
    "Boolean",
    "Satisfies",
    "RANDOM_STATE",
    "DEVICE",
    "DTYPE",
    "ParamsMixin",
    "check_params",
    "check_sample_weight",
]


class InvalidParameterError(ValueError, TypeError):
    """A constructor parameter has a value that is not allowed (a ``ValueError``, and a
    ``TypeError`` for callers that catch that for wrong types, as scikit-learn's does)."""


class _Spec:
    """One kind of allowed value."""

    def accepts(self, value) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _interval(low, high, closed: str) -> str:
    lo = "-inf" if low is None else repr(low)
    hi = "inf" if high is None else repr(high)
    left = "[" if closed in ("both", "left") and low is not None else "("
    right = "]" if closed in ("both", "right") and high is not None else ")"
    return f"{left}{lo}, {hi}{right}"


class Integer(_Spec):
    """An integer (not a bool) in ``[low, high]`` (``None``: unbounded)."""

    def __init__(self, low=None, high=None):
        self.low, self.high = low, high

    def accepts(self, v) -> bool:
        return (_is_int(v) and (self.low is None or v >= self.low)
                and (self.high is None or v <= self.high))

    def describe(self) -> str:
        if self.high is None and self.low is not None:
            return f"an integer >= {self.low}"
        return f"an integer in {_interval(self.low, self.high, 'both')}"


class Real(_Spec):
    """A finite real number (not a bool) in an interval; ``closed`` in both/left/right/neither."""

    def __init__(self, low=None, high=None, closed: str = "both"):
        self.low, self.high, self.closed = low, high, closed

    def accepts(self, v) -> bool:
        if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_)):
            return False
        if not math.isfinite(v):
            return False
        if self.low is not None:
            if v < self.low or (v == self.low and self.closed in ("right", "neither")):
                return False
        if self.high is not None:
            if v > self.high or (v == self.high and self.closed in ("left", "neither")):
                return False
        return True

    def describe(self) -> str:
        if self.high is None and self.low == 0:
            return "a positive number" if self.closed in ("right", "neither") else \
                "a non-negative number"
        return f"a number in {_interval(self.low, self.high, self.closed)}"


class Options(_Spec):
    """One of a few values (strings, None...), compared with ``==``."""

    def __init__(self, *values):
        self.values = values

    def accepts(self, v) -> bool:
        return any(v is o or (isinstance(v, str) and isinstance(o, str) and v == o)
                   for o in self.values)

    def describe(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.values)


class Boolean(_Spec):
    def accepts(self, v) -> bool:
        return isinstance(v, (bool, np.bool_))

    def describe(self) -> str:
        return "a bool"


class Satisfies(_Spec):
    """Any value for which ``predicate(value)`` is true (a predicate that raises means false)."""

    def __init__(self, predicate: Callable[[object], bool], description: str):
        self.predicate, self.description = predicate, description

    def accepts(self, v) -> bool:
        try:
            return bool(self.predicate(v))
        except Exception:  # noqa: BLE001 - a predicate that cannot read the value rejects it
            return False

    def describe(self) -> str:
        return self.description


def _valid_device(v) -> bool:
    if isinstance(v, torch.device):
        return True
    if not isinstance(v, str):
        return False
    if v == "auto":
        return True
    torch.device(v)  # raises on "nodevice"; availability is checked by fit (resolve_device)
    return True


def _valid_dtype(v) -> bool:
    from ._torch import resolve_dtype

    resolve_dtype(v)
    return True


RANDOM_STATE = Satisfies(
    lambda v: v is None or _is_int(v) and 0 <= v < 2**32 or isinstance(v, np.random.RandomState),
    "None, an integer in [0, 2**32) or a numpy RandomState")
DEVICE = Satisfies(_valid_device, "'auto', a torch device name ('cpu', 'cuda', 'cuda:1', "
                   "'mps') or a torch.device")
DTYPE = Satisfies(_valid_dtype, "'float32' or 'float64'")


class Param:
    """One row of an estimator's table: the default and the kinds of allowed values.

    ``None`` among ``allowed`` admits ``None``; a bare string admits that string. With
    ``positional=True`` the parameter may be passed by position (it must come before every
    keyword-only one in the table).
    """

    def __init__(self, default, *allowed, positional: bool = False):
        self.default = default
        self.positional = positional
        specs = []
        for a in allowed:
            if a is None or isinstance(a, str):
                specs.append(Options(a))
            elif isinstance(a, _Spec):
                specs.append(a)
            else:
                raise TypeError(f"not a parameter specification: {a!r}")
        self.allowed = tuple(specs)

    def accepts(self, v) -> bool:
        return any(s.accepts(v) for s in self.allowed)

    def describe(self) -> str:
        # merge the single-value options into one "one of ..." phrase
        opts = [o for s in self.allowed if isinstance(s, Options) for o in s.values]
        parts = [s.describe() for s in self.allowed if not isinstance(s, Options)]
        if opts:
            parts.append(("one of " if len(opts) > 1 else "") + ", ".join(repr(o) for o in opts))
        return " or ".join(parts)


def check_params(est, params: dict[str, Param] | None = None) -> None:
    """Check every parameter of ``est`` against its table; raise :class:`InvalidParameterError`."""
    params = type(est)._params if params is None else params
    name = type(est).__name__
    for pname, spec in params.items():
        v = getattr(est, pname)
        if not spec.accepts(v):
            raise InvalidParameterError(
                f"{name}: {pname}={v!r} is not valid; it must be {spec.describe()}.")


def _make_init(params: dict[str, Param], qualname: str):
    seen_keyword = False
    sig_params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for pname, spec in params.items():
        if spec.positional and seen_keyword:
            raise TypeError(f"{qualname}: positional parameter {pname!r} after keyword-only ones")
        seen_keyword |= not spec.positional
        kind = (inspect.Parameter.POSITIONAL_OR_KEYWORD if spec.positional
                else inspect.Parameter.KEYWORD_ONLY)
        sig_params.append(inspect.Parameter(pname, kind, default=spec.default))
    signature = inspect.Signature(sig_params)

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for pname, value in bound.arguments.items():
            if pname != "self":
                setattr(self, pname, value)

    __init__.__signature__ = signature
    __init__.__qualname__ = f"{qualname}.__init__"
    __init__.__doc__ = "Store the parameters unchanged (see the class docstring)."
    return __init__


class ParamsMixin:
    """Gives a class with a ``_params`` table its ``__init__`` and ``_check_params``.

    A subclass that defines ``_params`` in its own body gets a generated ``__init__`` (unless it
    writes its own); a subclass that does not inherits both.
    """

    _params: dict[str, Param] = {}
    #: ``{old name: new name}`` of renamed parameters: models pickled or saved with
    #: :func:`skset.save` before a rename still load
    _renamed_params: dict[str, str] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_params" in cls.__dict__ and "__init__" not in cls.__dict__:
            cls.__init__ = _make_init(cls._params, cls.__qualname__)

    #: ``{name: value}`` of parameters added after models were saved, with the value that gives
    #: those models' behaviour (a model saved without ``input_similarity`` had none)
    _legacy_params: dict[str, object] = {}

    @classmethod
    def _upgrade_params(cls, params: dict) -> dict:
        """``params`` (or a pickled ``__dict__``) with renamed parameters under their new names
        and parameters added since, which the saved model did not have, at their legacy value."""
        out = {cls._renamed_params.get(k, k): v for k, v in params.items()}
        for k, v in cls._legacy_params.items():
            out.setdefault(k, v)
        return out

    def __setstate__(self, state):
        state = self._upgrade_params(state)
        for k in self._legacy_params:  # skset.load sets the parameters before the state
            if k in self.__dict__:
                state.pop(k, None)
        super().__setstate__(state)

    def _check_params(self) -> None:
        """Check every parameter against the table, then the relations between them."""
        check_params(self)
        self._check_param_relations()

    def _check_param_relations(self) -> None:
        """Checks that involve several parameters; raise :class:`InvalidParameterError`."""

    def _param_error(self, message: str) -> InvalidParameterError:
        return InvalidParameterError(f"{type(self).__name__}: {message}")


def check_sample_weight(sample_weight, n_samples: int, name: str, what: str = "samples"
                        ) -> np.ndarray | None:
    """The checked ``sample_weight`` of a ``fit`` on ``n_samples`` samples (sets, or rows of a
    pool of elements): ``None``, or a float64 array ``(n_samples,)`` (a copy) whose largest
    weight is 1.

    scikit-learn's rules, with a scalar checked exactly as an array of that weight (broadcast
    first): a wrong length or shape, NaN, infinite or negative weights, or weights that are all
    zero raise a ``ValueError`` naming the estimator ``name`` and ``sample_weight``. Only relative
    weights matter, so they are divided by their maximum here, in float64, before any cast to a
    compute dtype: weights far outside float32's range (all times 1e39 or 1e-46) fit exactly as
    the same weights near 1. Equal weights become ones.
    """
    if sample_weight is None:
        return None
    from sklearn.utils.validation import _check_sample_weight

    if isinstance(sample_weight, torch.Tensor):
        sample_weight = sample_weight.detach().cpu().numpy()
    if isinstance(sample_weight, numbers.Number) or (isinstance(sample_weight, np.ndarray)
                                                     and sample_weight.ndim == 0):
        # scikit-learn broadcasts a scalar without checking it (NaN or infinity got through)
        try:
            sample_weight = np.full(n_samples, sample_weight, dtype=np.float64)
        except (TypeError, ValueError):
            pass  # not a real number: the array check below names it
    try:
        w = _check_sample_weight(sample_weight, np.empty((n_samples, 0)), dtype=np.float64,
                                 ensure_non_negative=True, copy=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name + ': ' if name else ''}invalid sample_weight ({n_samples} "
                         f"{what}, one non-negative finite weight each, not all zero): "
                         f"{exc}") from None
    w /= w.max()
    return w


# -- specifications used by several estimators ------------------------------------------------
POSITIVE_INT = Integer(1)
POSITIVE = Real(0, closed="neither")
NON_NEGATIVE = Real(0)

#: the last three parameters of every torch-backed estimator
TORCH_PARAMS = {
    "device": Param("auto", DEVICE),
    "dtype": Param("float32", DTYPE),
    "random_state": Param(None, RANDOM_STATE),
}
