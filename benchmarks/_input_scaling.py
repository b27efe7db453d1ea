"""Probe: other input scalings for the set networks (``--scaling MODE`` of
``bench_trained_columns.py`` and ``bench_st_tasks.py``).

The networks' ``standardize=True`` centres each element feature on its training mean and divides
it by its standard deviation (``mean_``, ``scale_``). ``install(mode)`` replaces the statistics
the estimators compute in ``fit`` (the ``weighted_mean_std`` their module calls), so that every
other step of a fit stays the estimator's own:

* ``center``: the mean subtracted, no scaling;
* ``scale``: each feature divided by its standard deviation, not centred;
* ``iso``: centred, every feature divided by one scale (the root mean square of the features'
  standard deviations);
* ``iso-nocenter``: that one scale, not centred;
* ``maxabs``: features that are non-negative and exactly 0 in at least a tenth of the training
  elements (pixel intensities, counts, one-hot codes) keep their zero and are divided by their
  largest value, times one factor that gives them a root-mean-square standard deviation of 1;
  the other features are standardised as by default.

Results: ``results/trained_vs_pooling.md``, "The networks' input scaling on the MNIST bags".
"""

import numpy as np

import skset.neural_network._set_networks as _networks
from skset._weighting import weighted_mean_std

MODES = ("center", "scale", "iso", "iso-nocenter", "maxabs")
MAXABS_ZEROS = 0.1


def statistics(mode, E, w=None):
    """``(mean, scale)`` of the training elements ``E`` (rows) under ``mode``."""
    mean, std = (np.asarray(a, dtype=np.float64).copy() for a in weighted_mean_std(E, w))
    rms = np.sqrt(np.mean(std ** 2))
    if mode == "center":
        std[:] = 1.0
    elif mode == "scale":
        mean[:] = 0.0
    elif mode in ("iso", "iso-nocenter"):
        std[:] = rms
        if mode == "iso-nocenter":
            mean[:] = 0.0
    elif mode == "maxabs":
        zero_inflated = (E.min(0) >= 0) & ((E == 0).mean(0) >= MAXABS_ZEROS) & (std > 0)
        if zero_inflated.any():
            top = E[:, zero_inflated].max(0)
            mean[zero_inflated] = 0.0
            std[zero_inflated] = top * np.sqrt(np.mean((std[zero_inflated] / top) ** 2))
    else:
        raise ValueError(f"unknown scaling {mode!r}; one of {MODES}")
    return mean, std


def install(mode):
    """Make the set networks' ``fit`` use ``mode`` (None: leave the estimators as they are)."""
    if mode is not None:
        _networks.weighted_mean_std = lambda E, w=None: statistics(mode, E, w)
