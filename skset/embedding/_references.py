"""How :class:`~skset.embedding.OTKEmbedding` fits its references: the k-means reference of a
group of sets, its free-support Wasserstein barycenter, the Wasserstein k-means of several
references (``fit``), the per-support counts ``fit`` leaves, and the step of every later
``partial_fit`` call.

Each function takes the estimator ``otk`` first and uses its settings and engine calls (the
packed batches, the transport plans and costs, the mean embedding); the maths shared with
:class:`~skset.NystromFeatures` that takes arrays only (the mini-batch k-means step, running
means, the random stream of each call) is in :mod:`skset._streaming`.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning

from .._sets import to_numpy
from .._streaming import center_counts, minibatch_kmeans_step, running_mean, step_rng, weight_scale
from .._threads import one_thread, user_stacklevel
from .._torch import map_on_threads
from .._validation import check_sample_weight
from .._weighting import (
    count_distinct,
    drop_zero_weight,
    kmeans_weights,
    resolve_max_samples,
    sample_elements,
)
from ._offset import input_space_mean, reference_tensor, shifted

__all__ = ["barycenter", "barycentric_targets", "fit_references", "kmeans_elements",
           "kmeans_reference", "reference_counts", "update_references"]


# -- one reference -------------------------------------------------------------------------------
def kmeans_elements(otk, sets, rng, weights=None):
    """``(elements, weights, unit)`` of ``sets`` a k-means sees (weight-0 elements left out, at
    most ``otk.max_samples``, ``"auto"`` resolved by :func:`skset._weighting.resolve_max_samples`;
    ``unit``: their counts' factor, :func:`skset._weighting.sample_elements`); ``weights``: one
    1-D array of element weights per set, or ``None``."""
    elems = np.concatenate(sets, axis=0)
    # never fewer rows than supports: fewer repeated supports with a jitter, features that only
    # repeat (NystromFeatures uses fewer anchors instead, with a warning)
    max_samples = max(resolve_max_samples(otk.max_samples, elems.shape[1], otk.n_supports_),
                      otk.n_supports_)
    return sample_elements(elems, None if weights is None else np.concatenate(weights),
                           max_samples, rng)


def kmeans_reference(otk, sets, rng, weights=None, init=None) -> np.ndarray:
    """k-means centres (``otk.n_supports_`` of them) of the elements of ``sets``; ``weights``:
    one 1-D array of element weights per set (elements of weight 0 are left out), or ``None``;
    ``init``: the centres to start from (a later round of several references), else k-means++."""
    elems, w, _ = kmeans_elements(otk, sets, rng, weights)
    p = otk.n_supports_  # at most the distinct elements of all training sets (fit)
    step = 4 * p
    if count_distinct((elems[i:i + step] for i in range(0, len(elems), step)), p) < p:
        # fewer distinct elements than p here (the sets of one reference of several): every
        # distinct element, then repeats with a tiny jitter (deterministic) in the data's scale
        uniq = np.unique(elems, axis=0)
        reps = np.concatenate([uniq, uniq[rng.choice(len(uniq), p - len(uniq))]])
        scale = float(np.abs(elems).max()) or 1.0
        return reps + 1e-6 * scale * rng.standard_normal(reps.shape)
    if init is not None:
        km = KMeans(n_clusters=p, init=init, n_init=1)
        with np.errstate(all="ignore"), one_thread():
            return km.fit(elems, sample_weight=w).cluster_centers_
    km = KMeans(n_clusters=p, n_init=1, random_state=rng.randint(2**31 - 1))
    with np.errstate(all="ignore"), one_thread():  # the same centres whatever the threads
        return km.fit(elems, sample_weight=w).cluster_centers_


def barycentric_targets(otk, sets, z: torch.Tensor, masses=None, set_weight=None):
    """``(sum over sets of w_i p (P_i^T x_i), sum of w_i)`` for one reference ``z (1, p, d)``
    (``w``: ``set_weight``, or ones; ``P``: the embedding's plan without positional weights):
    the barycenter's fixed-point map is their ratio."""
    sw = None if set_weight is None else torch.as_tensor(set_weight, dtype=otk._tdtype,
                                                         device=otk.device_)

    def run(idx):
        with torch.no_grad():  # thread-local in torch
            X, M, W = otk._pack_batch(sets, masses, idx)
            P = otk._plans(X, M, W, z, positions=False)[:, 0]
            if sw is not None:
                P = P * sw[torch.as_tensor(idx, device=otk.device_)][:, None, None]
            return z.shape[1] * torch.einsum("bnp,bnd->pd", P, X)

    # the length batches side by side, one intra-op thread each, their sums added in batch
    # order: the same references whatever the number of threads
    acc = torch.zeros_like(z[0])
    for part in map_on_threads(run, otk._batch_indices(sets), device=otk.device_):
        acc += part
    return acc, float(len(sets) if sw is None else sw.sum())


def barycenter(otk, sets, z0: np.ndarray, masses=None, set_weight=None) -> tuple[np.ndarray, int]:
    """Free-support Wasserstein barycenter, started from ``z0 (p, d)``: z_j <- mean over sets of
    p * (P^T x)_j (weighted by ``set_weight``, ``(n_sets,)`` or ``None``), at most
    ``otk.barycenter_iter`` times. Returns ``(z, iterations run)``."""
    z = torch.as_tensor(z0, dtype=otk._tdtype, device=otk.device_)[None]
    n_iter = 0
    for _ in range(otk.barycenter_iter):
        acc, total = barycentric_targets(otk, sets, z, masses, set_weight)
        z_new = acc / total
        shift = float((z_new - z[0]).norm() / z[0].norm().clamp_min(1e-12))
        z = z_new[None]
        n_iter += 1
        if shift < 1e-5:
            break
    else:  # as scikit-learn's iterative solvers say they stopped at their cap
        warnings.warn(f"{type(otk).__name__}: the Wasserstein barycenter stopped at "
                      f"barycenter_iter={otk.barycenter_iter} iterations with its supports still "
                      f"moving (last relative shift {shift:.2g}, converged below 1e-5); raise "
                      "barycenter_iter for a converged reference.", ConvergenceWarning,
                      stacklevel=user_stacklevel())
    return to_numpy(z[0]), n_iter


def fit_one(otk, sets, rng, masses=None, set_weight=None, init=None) -> tuple[np.ndarray, int]:
    """The reference of ``sets`` (``fit_method``): ``(z (p, d), barycenter iterations run)``;
    ``init``: the reference to start from (a later round of several references)."""
    if init is not None and otk.fit_method == "wasserstein":
        return barycenter(otk, sets, init, masses, set_weight)
    z = kmeans_reference(otk, sets, rng, kmeans_weights(sets, masses, set_weight), init)
    if otk.fit_method == "wasserstein":
        return barycenter(otk, sets, z, masses, set_weight)
    return z, 0


# -- several references --------------------------------------------------------------------------
def fit_references(otk, sets, rng, masses=None, sw=None):
    """The references of ``fit`` on the (positive-weight) training ``sets``: ``(references
    (q, p, d), assignments (n_sets,), Wasserstein k-means iterations, barycenter iterations)``.

    One reference: :func:`fit_one` on all the sets. Several (Wasserstein k-means, Mialon et al.
    2021, Section 2): groups started by k-means on the set means, then, up to
    ``otk.barycenter_iter`` times, each reference refitted on its sets and each set assigned to
    the reference of lowest transport cost (``otk._costs``), until the assignments repeat; an
    empty group takes the set its reference fitted worst in the previous round. Each round
    starts each reference from the previous one (Lloyd's alternation), and the round of lowest
    total cost is returned (its references and assignments). Needs at least ``q`` sets.
    """
    q = otk.n_references
    if q == 1:
        z, n_bary = fit_one(otk, sets, rng, masses, sw)
        return z[None], np.zeros(len(sets), dtype=np.int64), 0, n_bary
    # initial groups: k-means on set means (cheap, spreads references over the data)
    means = np.stack([s.mean(0) for s in sets] if masses is None else
                     [m @ s for s, m in zip(sets, masses, strict=True)])
    with one_thread():  # the same groups whatever the threads
        assign = KMeans(n_clusters=q, n_init=1, random_state=rng.randint(2**31 - 1)
                        ).fit_predict(means, sample_weight=sw)
    refs = np.empty((q, otk.n_supports_, otk.n_features_in_))
    worst = 0
    n_iter = n_bary = 0
    best = (np.inf, None, None)
    set_w = np.ones(len(sets)) if sw is None else np.asarray(sw, dtype=np.float64)
    for it in range(otk.barycenter_iter):
        for r in range(q):
            members = np.flatnonzero(assign == r)
            if len(members) == 0:  # empty cluster: take the worst-fitting set
                members = np.array([worst])
            refs[r], n = fit_one(
                otk, [sets[i] for i in members], rng,
                None if masses is None else [masses[i] for i in members],
                None if sw is None else sw[members], init=refs[r] if it else None)
            n_bary += n
        # Wasserstein k-means: each set to the reference of lowest transport cost
        costs = otk._costs(sets, torch.as_tensor(refs, dtype=otk._tdtype, device=otk.device_),
                           masses)
        new_assign = costs.argmin(1)
        worst = int(costs.min(1).argmax())  # the set its reference fits worst
        _fill_empty_groups(new_assign, costs, q)
        total = float(set_w @ np.asarray(costs)[np.arange(len(sets)), new_assign])
        if total < best[0]:
            best = (total, refs.copy(), new_assign.copy())
        n_iter = it + 1
        if np.array_equal(new_assign, assign):
            break
        assign = new_assign
    return best[1], best[2], n_iter, n_bary


def _fill_empty_groups(assign: np.ndarray, costs, q: int) -> None:
    """In place: each reference no set chose takes the set its own reference fits worst among
    the groups of several sets (a set that still preferred another reference left the group
    empty, and that reference unused)."""
    costs = np.asarray(costs)
    for r in range(q):
        sizes = np.bincount(assign, minlength=q)
        if sizes[r] == 0:
            movable = np.flatnonzero(sizes[assign] > 1)
            if len(movable):
                fit = costs[movable, assign[movable]]
                assign[movable[int(np.argmax(fit))]] = r


# -- counts and the later partial_fit calls ------------------------------------------------------
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
            elems, w, unit = kmeans_elements(otk, m_sets, rng,
                                             kmeans_weights(m_sets, m_masses, m_sw))
            counts[r] = unit * center_counts(shifted(otk, otk.references_[r], -1), elems, w)
    return counts


def update_references(otk, X, sample_weight, element_weight):
    """A later ``OTKEmbedding.partial_fit`` call (see its docstring): returns ``otk``. Every
    fitted attribute is computed first and set at the end: a refused chunk changes nothing."""
    otk._check_warm_dtype(otk.dtype_)
    sets = otk._check_X(X)
    masses = otk._check_masses(element_weight, sets)
    sw = check_sample_weight(sample_weight, len(sets), type(otk).__name__)
    scale = weight_scale(sample_weight, sum(len(s) for s in sets))
    ref_t = reference_tensor(otk)  # as the offset sets (OTKEmbedding._check_X) read them
    q = ref_t.shape[0]
    assignments = (np.zeros(len(sets), dtype=np.int64) if q == 1
                   else otk._costs(sets, ref_t, masses).argmin(1))
    kept, sw = drop_zero_weight(sw)
    assign = assignments
    if kept is not None:  # sets of weight 0 take no part
        sets, assign = [sets[i] for i in kept], assign[kept]
        masses = None if masses is None else [masses[i] for i in kept]
    rng = step_rng(otk.random_state, otk.n_steps_)
    refs, counts = shifted(otk, otk.references_, -1), otk.counts_.copy()
    for r in range(q):
        m_sets, m_masses, m_sw = _members(r, assign, sets, masses, sw)
        if not m_sets:
            continue
        if otk.fit_method == "wasserstein":  # one step of the barycenter's fixed point
            acc, total = barycentric_targets(otk, m_sets, ref_t[r:r + 1], m_masses, m_sw)
            refs[r] = running_mean(refs[r], counts[r], to_numpy(acc) / total, scale * total)
            counts[r] += scale * total
        else:
            elems, w, unit = kmeans_elements(otk, m_sets, rng,
                                             kmeans_weights(m_sets, m_masses, m_sw))
            refs[r], counts[r] = minibatch_kmeans_step(
                refs[r], counts[r], elems, scale * unit * (np.ones(len(elems)) if w is None else w))
    refs = shifted(otk, refs, 1).astype(otk.references_.dtype)  # in the input space
    new_t = reference_tensor(otk, refs)
    batch = scale * (len(sets) if sw is None else float(sw.sum()))
    mean = otk.mean_ if hasattr(otk, "mean_") else None
    if otk.center:  # running mean of the embeddings, each chunk's with its call's references
        chunk = input_space_mean(otk, otk._mean_embedding(sets, new_t, masses, sw))
        mean = running_mean(otk.mean_, otk.n_samples_seen_, chunk, batch).astype(
            otk.mean_.dtype)
    otk.assignments_, otk.references_, otk.counts_ = assignments, refs, counts
    if mean is not None:
        otk.mean_ = mean
    otk.n_samples_seen_ += batch
    otk.n_steps_ += 1
    return otk
