"""One table of allowed values per estimator, one checker.

Every skset estimator writes its ``__init__`` out (it only stores its arguments, as scikit-learn
requires; the default of a parameter lives in that signature and nowhere else) and declares what
each parameter may be once, as a class attribute ``_parameter_constraints``: ``{name: [allowed,
...]}``, where an entry is a specification (:class:`Integer`, :class:`Real`, :class:`Boolean`,
:class:`Options`, :class:`Satisfies`), ``None`` (admits ``None``) or a string (admits that
string), as in scikit-learn's tables of the same name. The table's keys are the constructor's
parameters (``tests/test_constructors.py`` checks it).

:meth:`skset._base.SksetEstimator._check_params`, called at the start of ``fit``, checks
every value against its table and raises :class:`InvalidParameterError` (a ``ValueError`` and a
``TypeError``) that names the estimator, the parameter, the value and what is allowed; relations
between parameters (``hidden_size`` divisible by ``n_heads``) go in
:meth:`~skset._base.SksetEstimator._check_param_relations`.

Tables shared by several estimators (the training parameters of the neural estimators, the
device and dtype) are plain dicts merged into each estimator's table, so that a parameter has one
name and one specification wherever it appears.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np
import torch

__all__ = [
    "InvalidParameterError",
    "Allowed",
    "Integer",
    "Real",
    "Options",
    "Boolean",
    "Satisfies",
    "RANDOM_STATE",
    "DEVICE",
    "DTYPE",
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


class Allowed:
    """The allowed values of one parameter: a row of a ``_parameter_constraints`` table (a list
    of specifications; ``None`` admits ``None``, a bare string admits that string)."""

    def __init__(self, constraints):
        if isinstance(constraints, (str, _Spec)) or constraints is None:
            raise TypeError("a row of _parameter_constraints is a list of specifications, not "
                            f"{constraints!r}")
        specs = []
        for a in constraints:
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


def check_params(est, constraints: dict[str, list] | None = None) -> None:
    """Check every parameter of ``est`` against its table (``constraints``, by default the
    class's ``_parameter_constraints``); raise :class:`InvalidParameterError`."""
    table = type(est)._parameter_constraints if constraints is None else constraints
    name = type(est).__name__
    for pname, row in table.items():
        allowed = Allowed(row)
        v = getattr(est, pname)
        if not allowed.accepts(v):
            raise InvalidParameterError(
                f"{name}: {pname}={v!r} is not valid; it must be {allowed.describe()}.")


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
        from ._sets import to_numpy

        sample_weight = to_numpy(sample_weight)
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

#: the last three parameters of every torch-backed estimator (``device="auto",
#: dtype="float32", random_state=None``)
TORCH_PARAMS = {
    "device": [DEVICE],
    "dtype": [DTYPE],
    "random_state": [RANDOM_STATE],
}
