"""What the ``partial_fit`` of :class:`~skset.NystromFeatures` and :class:`~skset.OTKEmbedding`
share: the mini-batch k-means step of their anchors / supports (batched, in torch), the running
averages with counts, the random stream of each call and the scale of its sample weights. Every
function here takes arrays, tensors or plain values, never an estimator; how each estimator
uses them is in its own module (``OTKEmbedding``'s in ``skset/embedding/_references.py``).

A mini-batch k-means step (Sculley 2010, with per-centre counts as in scikit-learn's
``MiniBatchKMeans``) assigns each element of the batch to its nearest centre and moves every
centre to the weighted mean of all the elements ever assigned to it:

.. math:: c_j \\leftarrow c_j + (\\bar x_j - c_j)\\, \\frac{s_j}{n_j + s_j}, \\qquad
          n_j \\leftarrow n_j + s_j,

with :math:`s_j` the weight of the batch's elements assigned to centre :math:`j`,
:math:`\\bar x_j` their weighted mean and :math:`n_j` the weight assigned to it before. The steps
shrink as the counts grow, so a stream of chunks from one distribution settles.
"""

from __future__ import annotations

import numpy as np
import torch

from ._sets import to_numpy
from ._torch import random_streams

__all__ = ["center_counts", "minibatch_kmeans_step", "running_mean", "step_rng", "weight_scale"]

#: the end of the ``partial_fit`` docstrings (weights, returns)
PARTIAL_FIT_WEIGHTS_DOC = """sample_weight, element_weight : as in :meth:`fit`
            Weights of the chunk's sets and elements; across calls the weights count in the
            same units (a set of weight 2 counts twice as much as one of weight 1 of another
            chunk).

        Returns
        -------
        self
        """

#: rows of the element-to-centre distance matrix computed at once (bounds its memory)
_ROWS = 16_384


def _nearest(centers: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Index of the nearest centre of every row of ``x`` (squared Euclidean distance)."""
    c2 = centers.square().sum(1)
    out = [torch.argmin(c2 - 2.0 * x[i:i + _ROWS] @ centers.T, dim=1)  # ||x||^2 is common
           for i in range(0, x.shape[0], _ROWS)]
    return torch.cat(out) if out else torch.empty(0, dtype=torch.long, device=x.device)


def _assigned(centers, x, w):
    """``(sums (k, d), weights (k,))`` of the rows of ``x`` (weights ``w`` or ones) assigned to
    each centre, as float64 tensors."""
    f64 = dict(dtype=torch.float64, device="cpu")  # numpy in and out: never the default device
    c = torch.as_tensor(np.asarray(centers), **f64)
    xt = torch.as_tensor(np.asarray(x), **f64)
    wt = torch.ones(xt.shape[0], **f64) if w is None else torch.as_tensor(np.asarray(w), **f64)
    lab = _nearest(c, xt)
    weights = torch.zeros(c.shape[0], **f64).index_add_(0, lab, wt)
    sums = torch.zeros_like(c).index_add_(0, lab, xt * wt[:, None])
    return c, sums, weights


def center_counts(centers: np.ndarray, x: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Weight of the rows of ``x`` nearest to each of ``centers`` ``(k, d)``: ``(k,)`` float64."""
    return _assigned(centers, x, w)[2].numpy()


def minibatch_kmeans_step(centers: np.ndarray, counts: np.ndarray, x: np.ndarray,
                          w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One mini-batch k-means step (see the module docstring): ``(centers, counts)`` updated
    with the rows ``x (n, d)`` of weights ``w (n,)`` (``None``: ones); centres that receive no
    row stay where they are. New float64 arrays; the inputs are not modified."""
    c, sums, s = _assigned(centers, x, w)
    n = torch.as_tensor(np.asarray(counts, dtype=np.float64), device="cpu") + s
    got = s > 0
    mean = sums / s.clamp_min(torch.finfo(torch.float64).tiny)[:, None]
    step = torch.where(got, s / n.clamp_min(torch.finfo(torch.float64).tiny), 0.0)[:, None]
    return (c + (mean - c) * step).numpy(), n.numpy()


def running_mean(mean: np.ndarray, count, batch_mean: np.ndarray, batch_count) -> np.ndarray:
    """The mean of everything after a batch of weight ``batch_count`` and mean ``batch_mean``
    joins ``count`` of mean ``mean`` (``count`` broadcasts against the leading axes)."""
    total = np.asarray(count, dtype=np.float64) + batch_count
    frac = np.divide(batch_count, total, out=np.zeros_like(total, dtype=np.float64),
                     where=total > 0)
    frac = frac.reshape(frac.shape + (1,) * (np.ndim(mean) - frac.ndim))
    return mean + (np.asarray(batch_mean, dtype=np.float64) - mean) * frac


def step_rng(random_state, n_steps: int) -> np.random.RandomState:
    """The random stream of the ``n_steps``-th call of a stream (its element sample): one per
    call, reproducible for an int ``random_state``."""
    seed, _ = random_streams(random_state)
    return np.random.RandomState((seed + 7919 * int(n_steps)) % 2**32)


def weight_scale(sample_weight, n_rows: int = 1) -> float:
    """The largest of the raw ``sample_weight`` (1 for ``None``): the checked weights are divided
    by it (:func:`skset._validation.check_sample_weight`), and a stream multiplies it back so
    that the weights of different calls count alike. Call after the check. A ``ValueError``
    where the counts it scales, up to ``n_rows`` elements of that weight, would overflow
    float64 (only the weights' ratios matter: they can be divided)."""
    if sample_weight is None:
        return 1.0
    if isinstance(sample_weight, torch.Tensor):
        sample_weight = to_numpy(sample_weight)
    top = float(np.max(np.asarray(sample_weight, dtype=np.float64)))
    if not np.isfinite(top * max(n_rows, 1)):
        raise ValueError(f"sample_weight: weights up to {top:.3g} over {n_rows} elements overflow "
                         "the fitted counts (float64); only the weights' ratios matter: divide "
                         "them all by the same factor.")
    return top
