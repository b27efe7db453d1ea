"""``OTKEmbedding(position_sigma="auto")``: whether the order of the elements is read, chosen
from the labels in ``fit``.

Positional weights (:mod:`skset.ot._positions`) tie the ``i``-th of ``n`` elements to the
supports near ``i/n``: the embedding then tells where in a sequence a pattern sits. That helps
when the time of an event identifies the class (a gesture, a spike) and hurts when it does not
(a leaf outline that starts anywhere), and on an unordered bag it only adds noise. The rule
scores one candidate width, :data:`POSITION_CANDIDATE`, with the proxy of the element map's
choice (:mod:`skset._map_selection`): the leave-one-out squared error of a ridge model on the
embeddings of a sample of the training sets. Positions are taken only when they beat both

* the embedding without positions (the incumbent), and
* the same positional weights on the same sets with their elements shuffled (a control: when
  the order carries nothing, shuffling it changes nothing but the draw),

each by a paired t statistic over the sampled sets above ``MIN_T``. Without usable labels, or
when every set has one element, there are no positions.
"""

from __future__ import annotations

import numpy as np
import torch

from .._label_tasks import _shared_classes, _targets, _task
from .._map_selection import (
    MIN_T,
    sample_sets,
    standardized_loo_errors,
)
from .._stats import beats

__all__ = ["POSITION_CANDIDATE", "select_position_sigma"]

#: the positional width ``position_sigma="auto"`` compares with no positions. On the suite (every
#: data set, seeds 0-2, ``benchmarks/bench_position_rule.py``) 0.3 gains most where positions
#: help (PickupGestureWiimoteZ 60.7 -> 74.0, DigitPatches 85.5 -> 91.8) and passes the rule's
#: tests nowhere it costs; 1.0 passes them on ACSF1, where it costs 2.7 points, and 0.1 on
#: WatchWindows. One width also keeps the chance of a win by noise that of a single test
POSITION_CANDIDATE = 0.3


def _proxy_errors(raw: np.ndarray, target: np.ndarray, normalize: bool) -> np.ndarray:
    """The proxy's errors on raw embeddings ``(n, D)``: the estimator's output step (centred on
    their mean; rows on the unit sphere with ``normalize``), columns standardised, leave-one-out
    ridge; infinite errors when a value is not finite."""
    emb = raw.astype(np.float64) - raw.mean(0, dtype=np.float64)
    if normalize:
        norms = np.linalg.norm(emb, axis=1, keepdims=True)
        emb = emb / np.where(norms > 0, norms, 1.0)
    return standardized_loo_errors(emb, target)


def select_position_sigma(otk, sets, y, masses, references: torch.Tensor,
                          rng: np.random.RandomState, given=None):
    """Choose ``position_sigma_`` for ``position_sigma="auto"``.

    Parameters
    ----------
    otk : OTKEmbedding
        The estimator being fitted (its Sinkhorn settings, ``position_mode``, ``normalize``).
    sets : list of (n_i, d) arrays
        The training sets (those of positive ``sample_weight``).
    y : array-like or None
        One label per set (``None``, per-element or multi-output labels: no positions).
    masses : list of 1-D arrays or None
        The sets' element masses.
    references : tensor (q, p, d)
        The fitted references.
    rng : numpy RandomState
        The rule's own stream (the sample of sets, the shuffles).
    given : (list of arrays, tensor) or None
        With ``position_mode="similarity"`` and an ``input_offset_``: the sets as given and the
        references in input space, on which the positioned candidates are scored (with no
        offset: similarity-scaled plans change under a shift, and a fit that takes positions
        drops the offset, :func:`skset.embedding._offset.drop_offset`); ``sets`` and
        ``references`` (less the offset) score no positions, as the ``None`` fit reads them.

    Returns
    -------
    sigma : float or None
    scores : dict or None
        ``{"none": ..., "positions": ..., "shuffled": ...}``: minus the mean leave-one-out error
        of each embedding (higher is better; ``"shuffled"`` is absent when positions did not
        beat no positions), or ``None`` when nothing was scored.
    raw : ndarray or None
        The raw embeddings of all ``sets`` (in order) with ``sigma``, when the rule computed
        them (the sample was every set): the fit's mean embedding reuses them.
    """
    task = _task(y, len(sets), otk.target_type)
    if task is None or max(len(s) for s in sets) < 2:
        return None, None, None
    idx = np.arange(len(sets))
    if task == "classification":  # the sets of classes of one set are left out (see _task)
        idx = idx[_shared_classes(np.asarray(y))]
    idx, sub_y = sample_sets(idx, np.asarray(y)[idx], rng)
    if task == "classification" and np.unique(sub_y).size < 2:
        return None, None, None
    every = len(idx) == len(sets)  # the sample is every set, in order
    sub = [sets[i] for i in idx]
    sub_masses = None if masses is None else [masses[i] for i in idx]
    target = _targets(task, sub_y)

    raws = {}

    sub_given = None if given is None else [given[0][i] for i in idx]

    def errors(sigma, chosen_sets, chosen_masses, keep=False):
        as_given = given is not None and sigma is not None  # no offset (see above)
        raw = otk._raw_embed(chosen_sets, given[1] if as_given else references, chosen_masses,
                             position_sigma=sigma, shifted=not as_given)
        if keep and every:
            raws[sigma] = raw
        return _proxy_errors(raw, target, otk.normalize)

    e_none = errors(None, sub, sub_masses, keep=True)
    e_pos = errors(POSITION_CANDIDATE, sub if given is None else sub_given, sub_masses, keep=True)
    scores = {"none": -float(e_none.mean()), "positions": -float(e_pos.mean())}
    if not beats(e_none, e_pos, MIN_T, flat=0.0):
        return None, scores, raws.get(None)
    perms = [rng.permutation(len(s)) for s in sub]
    shuffled = [s[p] for s, p in zip(sub if given is None else sub_given, perms)]
    shuffled_masses = None if sub_masses is None else [m[p] for m, p in zip(sub_masses, perms)]
    e_shuf = errors(POSITION_CANDIDATE, shuffled, shuffled_masses)
    scores["shuffled"] = -float(e_shuf.mean())
    sigma = POSITION_CANDIDATE if beats(e_shuf, e_pos, MIN_T, flat=0.0) else None
    return sigma, scores, raws.get(sigma)
