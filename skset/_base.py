"""The base of every torch-backed skset estimator.

:class:`TorchEstimator` joins the parameter table (:class:`skset._validation.ParamsMixin`), pickling
with tensors on the CPU (:class:`skset._torch.TorchStateMixin`) and scikit-learn's
``BaseEstimator``, and starts every ``fit`` the same way (:meth:`TorchEstimator._begin_fit`):
parameters checked, device and dtype resolved, random streams drawn. The trained estimators
extend it in :mod:`skset.neural_network._base`.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from ._torch import TorchStateMixin, random_streams, resolve_device, resolve_dtype
from ._validation import ParamsMixin

__all__ = ["TorchEstimator"]


class TorchEstimator(ParamsMixin, TorchStateMixin, BaseEstimator):
    """Parameter table, device, dtype, random streams and CPU pickling; see the module docstring."""

    def _begin_fit(self) -> tuple[int, np.random.RandomState]:
        """Check the parameters, set ``device_`` and ``dtype_``; return ``(seed, rng)``."""
        self._check_params()
        self.device_ = resolve_device(self.device)
        self.dtype_ = resolve_dtype(self._compute_dtype())
        return random_streams(self.random_state)

    def _compute_dtype(self) -> str:
        """The name of the dtype a fit computes in: the ``dtype`` parameter (an estimator that has
        none says which here)."""
        return self.dtype
