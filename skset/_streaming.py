"""What the ``partial_fit`` of :class:`~skset.NystromFeatures` and :class:`~skset.OTKEmbedding`
share: the mini-batch k-means step of their anchors / supports (batched, in torch), the running
averages with counts, the random stream of each call and the scale of its sample weights; and
the later calls of ``OTKEmbedding.partial_fit`` (:func:`update_references`), which use the
estimator's own helpers (its k-means sample, barycentric targets, transport costs, embedding).

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

from ._torch import random_streams, to_numpy
from ._validation import check_sample_weight
from ._weighting import drop_zero_weight, kmeans_weights

__all__ = ["center_counts", "minibatch_kmeans_step", "reference_counts", "running_mean", "step_rng",
           "update_references", "weight_scale"]

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


def weight_scale(sample_weight) -> float:
    """The largest of the raw ``sample_weight`` (1 for ``None``): the checked weights are divided
    by it (:func:`skset._validation.check_sample_weight`), and a stream multiplies it back so
    that the weights of different calls count alike. Call after the check."""
    if sample_weight is None:
        return 1.0
    if isinstance(sample_weight, torch.Tensor):
        sample_weight = sample_weight.detach().cpu().numpy()
    return float(np.max(np.asarray(sample_weight, dtype=np.float64)))


# -- OTKEmbedding ------------------------------------------------------------------------------
def _members(r, assign, sets, masses, sw):
    """``(sets, masses, weights)`` of the sets assigned to reference ``r``."""
    idx = np.flatnonzero(assign == r)
    return ([sets[i] for i in idx], None if masses is None else [masses[i] for i in idx],
            None if sw is None else sw[idx])


def reference_counts(otk, sets, masses, sw, assign, rng) -> np.ndarray:
    """``(q, p)``: the weight of the elements nearest to each support of ``otk.references_``
    among the sets ``assign``-ed to its reference (``fit_method="kmeans"``), or of those sets
    (``"wasserstein"``), in the units of the checked ``sw``."""
    counts = np.zeros(otk.references_.shape[:2])
    for r in range(len(counts)):
        m_sets, m_masses, m_sw = _members(r, assign, sets, masses, sw)
        if not m_sets:
            continue
        if otk.fit_method == "wasserstein":
            counts[r] = len(m_sets) if m_sw is None else m_sw.sum()
        else:
            elems, w = otk._kmeans_elements(m_sets, rng, kmeans_weights(m_sets, m_masses, m_sw))
            counts[r] = center_counts(otk.references_[r], elems, w)
    return counts


def update_references(otk, X, sample_weight, element_weight):
    """A later ``OTKEmbedding.partial_fit`` call (see its docstring): returns ``otk``. Every
    fitted attribute is computed first and set at the end: a refused chunk changes nothing."""
    otk._check_warm_dtype(otk.references_.dtype)
    sets = otk._check_X(X)
    masses = otk._check_masses(element_weight, sets)
    sw = check_sample_weight(sample_weight, len(sets), type(otk).__name__)
    scale = weight_scale(sample_weight)
    ref_t = torch.as_tensor(otk.references_, device=otk.device_)
    q = ref_t.shape[0]
    assignments = (np.zeros(len(sets), dtype=np.int64) if q == 1
                   else otk._costs(sets, ref_t, masses).argmin(1))
    kept, sw = drop_zero_weight(sw)
    assign = assignments
    if kept is not None:  # sets of weight 0 take no part
        sets, assign = [sets[i] for i in kept], assign[kept]
        masses = None if masses is None else [masses[i] for i in kept]
    rng = step_rng(otk.random_state, otk.n_steps_)
    refs, counts = otk.references_.astype(np.float64), otk.counts_.copy()
    for r in range(q):
        m_sets, m_masses, m_sw = _members(r, assign, sets, masses, sw)
        if not m_sets:
            continue
        if otk.fit_method == "wasserstein":  # one step of the barycenter's fixed point
            acc, total = otk._barycentric_targets(m_sets, ref_t[r:r + 1], m_masses, m_sw)
            refs[r] = running_mean(refs[r], counts[r], to_numpy(acc) / total, scale * total)
            counts[r] += scale * total
        else:
            elems, w = otk._kmeans_elements(m_sets, rng, kmeans_weights(m_sets, m_masses, m_sw))
            refs[r], counts[r] = minibatch_kmeans_step(
                refs[r], counts[r], elems, scale * (np.ones(len(elems)) if w is None else w))
    refs = refs.astype(otk.references_.dtype)
    batch = scale * (len(sets) if sw is None else float(sw.sum()))
    mean = otk.mean_ if hasattr(otk, "mean_") else None
    if otk.center:  # running mean of the embeddings, each chunk's with its call's references
        chunk = otk._mean_embedding(sets, torch.as_tensor(refs, device=otk.device_), masses, sw)
        mean = running_mean(otk.mean_, otk.n_samples_seen_, chunk, batch).astype(
            otk.mean_.dtype)
    otk.assignments_, otk.references_, otk.counts_ = assignments, refs, counts
    if mean is not None:
        otk.mean_ = mean
    otk.n_samples_seen_ += batch
    otk.n_steps_ += 1
    return otk
