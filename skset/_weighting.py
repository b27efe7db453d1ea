"""Sample and element weights: the one copy of each helper that weighted fits share.

Every estimator that takes ``sample_weight`` (one weight per set, or per row of a pool) or
``element_weight`` (masses of the elements of each set) goes through these:

* :func:`drop_zero_weight` - the samples of positive weight, and their weights (``None`` when all
  equal: a constant weight is exactly no weight);
* :func:`positive_sets` - the sets of positive weight, their labels and weights;
* :func:`positive_rows` - the rows a choice reads: those of positive weight;
* :func:`element_masses` - checked element masses, ``None`` when every set's are uniform;
* :func:`kmer_weights` - the weight of each k-mer, the mean of its elements' weights;
* :func:`sample_elements` - the elements a fit draws its anchors or supports from: weight-0
  elements left out, at most ``max_samples`` drawn at random;
* :func:`weighted_mean_std` - weighted moments of rows, exact near float64's limits;
* :func:`kmeans_weights` - the weights of the elements of sets in a k-means (each set keeps its
  total weight, shared by its elements' masses);
* :func:`count_distinct` - how many distinct elements there are, up to a limit (the supports or
  anchors a fit can have).

and the check of the element masses, :func:`check_element_weights` (one 1-D array per set,
finite, non-negative, not all zero; normalised per set in one pass over all of them); the check
of ``sample_weight`` (:func:`skset._validation.check_sample_weight`) stays with the other
input checks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch

from ._sets import _describe, check_kmer_lengths, dtype_name, kmer_windows, to_numpy

__all__ = ["check_element_weights", "count_distinct", "drop_zero_weight", "element_masses",
           "kmeans_weights", "kmer_weights", "positive_rows", "positive_sets", "resolve_max_samples",
           "sample_elements", "set_totals", "spanned_masses", "standardized_sets", "weighted_mean_std"]


def drop_zero_weight(sample_weight: np.ndarray | None):
    """``(keep, weights)``: the indices of the samples of positive weight (``None``: all), and
    their weights, ``None`` when they are all equal (a constant weight changes nothing: such a
    fit is exactly the unweighted one)."""
    if sample_weight is None:
        return None, None
    keep = np.flatnonzero(sample_weight > 0)
    w = sample_weight[keep]
    if len(keep) == len(sample_weight):
        keep = None
    return keep, (None if np.all(w == w[0]) else w)


def positive_sets(X, y, sample_weight, element_weight=None):
    """``(X, y, sample_weight, element_weight)`` of the sets of positive weight only (the inputs
    themselves when every weight is positive). ``X``: a collection of sets (list, tuple or array
    of sets), ``y``: checked labels (array, list of per-set arrays, or None), ``sample_weight``:
    valid weights as given (their scale kept: a stream counts them across calls);
    ``element_weight`` is kept as given unless it has one entry per set."""
    if hasattr(sample_weight, "detach"):  # a torch tensor
        sample_weight = to_numpy(sample_weight)
    w = np.asarray(sample_weight, dtype=np.float64)
    keep = None if w.ndim == 0 else drop_zero_weight(w)[0]  # a valid scalar is positive
    if keep is None:
        return X, y, sample_weight, element_weight
    sample_weight = w

    def pick(a):  # by position (a pandas Series of sets too, as check_sets reads it)
        if isinstance(a, np.ndarray):
            return a[keep]
        return [a.iloc[i] for i in keep] if hasattr(a, "iloc") else [a[i] for i in keep]

    if element_weight is not None and len(element_weight) == len(sample_weight):
        element_weight = pick(list(element_weight))
    return pick(X), (None if y is None else pick(y)), sample_weight[keep], element_weight


def positive_rows(coll, sets: list, y, weights: np.ndarray | None, rows_are_read: bool):
    """``(coll, sets, y)`` as a data-driven choice should read them: the rows of weight 0 (an
    element of mass 0, a row of a pool of weight 0) left out, as the fit leaves them out of its
    moments and its k-means. ``weights``: one per row of the stacked ``sets`` (of a pool, per row
    of ``coll.sets[0]``), or None; ``rows_are_read``: the rows of ``sets`` are what the choice
    reads (single elements, or k-mers already cut), else the rows stay (a k-mer cut later keeps
    its elements of mass 0, as its weight, their mean, does)."""
    if weights is None or weights.all():
        return coll, sets, y
    keep = weights > 0
    if coll.form == "2d":  # a pool: its rows and their labels (k-mers' weights: nothing to drop)
        if len(keep) != len(coll.sets[0]):
            return coll, sets, y
        y = None if y is None else np.asarray(y)[keep]
        return dataclasses.replace(coll, sets=[coll.sets[0][keep]]), sets, y
    if not rows_are_read or len(keep) != sum(len(s) for s in sets):
        return coll, sets, y
    parts = np.split(keep, np.cumsum([len(s) for s in sets])[:-1])
    return coll, [s[k] if k.any() else s for s, k in zip(sets, parts, strict=True)], y


def check_kept_sets(coll, sw, window: int, dilation: int, element_weight, name: str) -> None:
    """The checks a fit makes of the sets of positive weight (``sw``; None: all), made on the
    whole collection so that an error names a set by its place in ``X`` (the fit reads the kept
    sets only, where set 1 may be the caller's set 3): sets shorter than the k-mer ``window``,
    bad ``element_weight``. Sets of weight 0 are as if removed: neither is checked."""
    kept = np.ones(len(coll.lengths), dtype=bool) if sw is None else sw > 0
    check_kmer_lengths(np.where(kept, coll.lengths, np.iinfo(np.int64).max), window,
                       dilation=dilation)
    if element_weight is not None:  # (a wrong count named against every set of X)
        element_masses(element_weight if len(element_weight) != len(kept) else
                       [w if k else np.ones(n) for w, k, n in zip(element_weight, kept,
                                                                  coll.lengths)], coll.sets, name)


def check_element_weights(element_weight, lengths: Sequence[int], *,
                          name: str = "element_weight") -> list[np.ndarray] | None:
    """Validate per-element masses: one 1-D array per set, matching the set lengths.

    ``element_weight`` is ``None``, a list (or 1-D object array) of 1-D arrays, or a 2-D array
    ``(n_sets, n)`` when all sets have ``n`` elements. Each set's weights must be finite,
    non-negative and not all zero; they are returned normalised to sum 1 (float64 copies, the
    input is never modified). Raises ``ValueError`` naming the set.
    """
    checked = _checked_masses(element_weight, lengths, name)
    return None if checked is None else checked[0]


def _checked_masses(element_weight, lengths, name):
    """:func:`check_element_weights`' masses and whether every set's are uniform, ``(masses,
    uniform)``, or ``None``."""
    if element_weight is None:
        return None
    if isinstance(element_weight, torch.Tensor):
        element_weight = to_numpy(element_weight)
    elif hasattr(element_weight, "to_numpy") and hasattr(element_weight, "columns"):  # a frame
        element_weight = element_weight.to_numpy()  # its rows, not its column labels
    if isinstance(element_weight, (str, bytes, dict)) or np.isscalar(element_weight):
        raise ValueError(f"{name} must be a list of 1-D arrays, one per set, got "
                         f"{_describe(element_weight)}.")
    if isinstance(element_weight, np.ndarray) and element_weight.dtype != object:
        if element_weight.ndim != 2:
            raise ValueError(f"{name} is an array of shape {element_weight.shape}; expected a "
                             "list of 1-D arrays (one per set) or a 2-D array (n_sets, n).")
        element_weight = list(element_weight)
    rows = list(element_weight)
    if len(rows) != len(lengths):
        raise ValueError(f"{name} holds {len(rows)} entries but X holds {len(lengths)} sets; give "
                         "one 1-D array of weights per set.")
    arrays = []  # each set's weights as a 1-D array of its length (not yet copied)

    def fail(message):  # a set that cannot be read: an earlier set's faulty values first
        if arrays:
            _normalised_masses(arrays, name)
        raise ValueError(message)

    for i, (w, n) in enumerate(zip(rows, lengths, strict=True)):
        where = f"{name}: set {i}"
        if isinstance(w, torch.Tensor):
            w = to_numpy(w)
        if w is None:
            fail(f"{where} is None; expected a 1-D array of {n} weights, one per element.")
        try:
            arr = np.asarray(w, dtype=np.float64)
        except (TypeError, ValueError):
            fail(f"{where} is not an array of numbers ({_describe(w)}).")
        if arr.ndim != 1:
            fail(f"{where} has shape {arr.shape}; expected a 1-D array of {n} weights, one per "
                 "element.")
        if arr.shape[0] != n:
            fail(f"{where} has {arr.shape[0]} weights but the set has {n} elements.")
        arrays.append(arr)
    return _normalised_masses(arrays, name)


def _normalised_masses(arrays: list[np.ndarray], name: str) -> tuple[list[np.ndarray], bool]:
    """The checked weights (one float64 1-D array per set, none empty) normalised to sum 1, in
    one pass over all of them (a new buffer: the input is never written), each set's its own
    view, and whether every set's masses are uniform; errors name the first faulty set."""
    lengths = np.fromiter((a.shape[0] for a in arrays), dtype=np.int64, count=len(arrays))
    flat = np.concatenate(arrays) if arrays else np.zeros(0)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    with np.errstate(over="ignore", invalid="ignore"):
        totals = np.add.reduceat(flat, starts)
    nonfinite = np.add.reduceat(~np.isfinite(flat), starts) > 0
    negative = np.add.reduceat(flat < 0, starts) > 0
    faulty = np.flatnonzero(nonfinite | negative | ~(totals > 0))
    if faulty.size:  # the first faulty set, its first fault in the order of the checks
        i = int(faulty[0])
        what = ("contains NaN or infinity." if nonfinite[i] else
                "contains negative weights; element masses must be non-negative." if negative[i]
                else "is all zero; a set needs a positive total mass.")
        raise ValueError(f"{name}: set {i} {what}")
    masses = flat / np.repeat(totals, lengths)
    out = np.split(masses, starts[1:])  # views of masses
    for i in np.flatnonzero(~np.isfinite(totals)):  # masses near float64's largest: their ratios
        arr = arrays[i] / arrays[i].max()
        out[i][:] = arr / arr.sum()
    # uniform: each set's largest mass is its smallest
    uniform = np.array_equal(np.maximum.reduceat(masses, starts), np.minimum.reduceat(masses, starts))
    return out, uniform


def element_masses(element_weight, sets, name: str) -> list[np.ndarray] | None:
    """The element masses of ``sets`` normalised per set (float64 copies, see
    :func:`check_element_weights`), or ``None`` when every set's are uniform (so that
    uniform masses give exactly the computation without masses). ``name`` prefixes errors."""
    checked = _checked_masses(element_weight, [s.shape[0] for s in sets], f"{name}: element_weight")
    return None if checked is None or checked[1] else checked[0]


def spanned_masses(element_weight, sets):
    """``element_weight`` given per element of sequences that a k-mer map upstream (a
    ``NystromFeatures`` with a window, before an ``OTKEmbedding`` in a pipeline) turned into
    ``sets`` of k-mers: when every set has the same ``span - 1`` masses more than rows (a set
    shorter than the span: one row), each k-mer's mass is the mean of the masses of the ``span``
    elements it covers (of every element, for a set of one k-mer; over the whole span for
    dilated k-mers, whose dilation the embedding does not know); otherwise as given (the
    checks then name a mismatch)."""
    if element_weight is None:
        return element_weight
    try:
        masses = [np.asarray(to_numpy(w) if hasattr(w, "detach") else w, dtype=np.float64)
                  for w in element_weight]  # tensors on a GPU too
    except (TypeError, ValueError):
        return element_weight
    rows = [s.shape[0] for s in sets]
    if len(masses) != len(sets) or any(m.ndim != 1 for m in masses):
        return element_weight
    if all(len(m) == r for m, r in zip(masses, rows, strict=True)):
        return element_weight
    extra = {len(m) - r for m, r in zip(masses, rows, strict=True) if r > 1}
    if len(extra) > 1 or (extra and min(extra) < 1):
        return element_weight
    span = extra.pop() + 1 if extra else max(len(m) for m in masses)  # every set one k-mer
    if any(r == 1 and len(m) > span for m, r in zip(masses, rows, strict=True)):
        return element_weight
    # a set of one k-mer (as long as the span, or shorter): the mean of all its masses
    return [m[None].mean(1) if r == 1 else kmer_weights([m], span)[0]
            for m, r in zip(masses, rows, strict=True)]


def kmer_weights(weights: list[np.ndarray], window: int, dilation: int = 1) -> list[np.ndarray]:
    """The weight of every k-mer of :func:`skset._sets.kmer_windows`: the mean of the weights of
    its ``window`` elements (one 1-D array per set in, one per set out)."""
    if window == 1:
        return weights
    return [w.mean(1) for w in kmer_windows([m[:, None] for m in weights], window,
                                            dilation=dilation)]


#: ``max_samples="auto"`` (``NystromFeatures``, ``OTKEmbedding``): k-means sees at most this many
#: rows
AUTO_MAX_SAMPLES = 100_000
#: and at most this many values (rows x features): k-means costs rows x features x centres per
#: iteration, so wide elements or k-mers get fewer rows (coded 10-mers of 120 features, 57,300 of
#: them: 63 s of Lloyd's iterations on one thread; ``benchmarks/bench_window_memory.py``)
MAX_SAMPLE_VALUES = 2**25


def resolve_max_samples(max_samples, n_features: int, n_clusters: int) -> int:
    """The rows a k-means of ``n_clusters`` centres samples from rows of ``n_features``: an
    explicit ``max_samples`` as given; ``"auto"``: ``AUTO_MAX_SAMPLES``, fewer where they would
    hold more than ``MAX_SAMPLE_VALUES`` values, never fewer than ``n_clusters``."""
    if max_samples != "auto":
        return int(max_samples)
    return int(min(AUTO_MAX_SAMPLES, max(MAX_SAMPLE_VALUES // max(int(n_features), 1),
                                         int(n_clusters))))


def sample_elements(elements: np.ndarray, weights: np.ndarray | None, max_samples: int, rng):
    """``(elements, weights, unit)`` a fit learns from: elements of weight 0 left out, the
    weights ``None`` when equal, then at most ``max_samples`` rows drawn without replacement
    with ``rng`` (a ``RandomState``; it is not drawn from when there are few enough rows).
    ``unit``: the factor that puts a count of the returned rows (1 each when ``weights`` is
    ``None``) back in the units of ``weights`` over every row (equal weights of 0.5, or a sample
    of 50 rows of 200, count 0.5 or 4 each in a stream's ``counts_``)."""
    w = None
    total = float(elements.shape[0])
    if weights is not None:
        keep = weights > 0
        elements, w = elements[keep], weights[keep]
        total = float(w.sum())
        if np.all(w == w[0]):
            w = None
    if elements.shape[0] > max_samples:
        pick = rng.choice(elements.shape[0], max_samples, replace=False)
        elements = elements[pick]
        w = None if w is None else w[pick]
    counted = float(elements.shape[0] if w is None else w.sum())
    return elements, w, (total / counted if counted > 0 else 1.0)


def weighted_mean_std(values: np.ndarray, weights: np.ndarray | None = None, *,
                      keep_dtype: bool = False):
    """``(mean, std)`` of the rows of ``values`` (axis 0), row ``i`` weighted by ``weights[i]``.

    Rows of weight 0 are left out (exactly as if absent); equal weights give ``values.mean(0)`` and
    ``values.std(0)`` exactly, so all-ones weights change nothing. Integer weights give the moments
    of the rows repeated that many times (the population standard deviation, as ``np.std``).
    Each column is computed in units of a power of 2 near its largest magnitude (exact scaling),
    so that values near 1e300 (whose squares overflow) or 1e-300 (whose squares underflow) give
    their true moments. The moments are computed in float64, or with ``keep_dtype`` in the
    dtype of ``values`` (float32 data stays float32: the unweighted moments are then exactly
    ``values.mean(0)`` and ``values.std(0)``).
    """
    if weights is not None:
        keep = weights > 0
        if not keep.all():
            values, weights = values[keep], weights[keep]
        if np.all(weights == weights[0]):
            weights = None
    top = np.abs(values).max(0)
    unit = np.where((top > 0) & np.isfinite(top), np.ldexp(1.0, np.frexp(top)[1] - 1), 1.0)
    if keep_dtype:
        unit = unit.astype(values.dtype)
    values = values / unit
    if weights is None:
        return values.mean(0) * unit, values.std(0) * unit
    mean = np.average(values, axis=0, weights=weights)
    var = np.average((values - mean) ** 2, axis=0, weights=weights)
    return mean * unit, np.sqrt(var) * unit


def standardized_sets(sets: list[np.ndarray], mean: np.ndarray, scale: np.ndarray,
                      small: int = 64, dtype=None) -> list[np.ndarray]:
    """``(s - mean) / scale`` of each set, in the wider of its dtype and ``dtype`` (the model's
    compute dtype: a float64 model rounded a float32 set alone to float32, and not beside a
    float64 set), new arrays (the sets are not written).
    Sets of fewer than ``small`` elements on average in one pass over their rows, returned as
    views of it: one numpy call per set was 30% of a Deep Sets ``predict_proba`` on 50,000 sets
    of 1-4 elements (long sets: one call each, as one pass would copy them once more)."""
    def out(dt):
        return dt if dtype is None else np.result_type(dt, dtype_name(dtype))

    if len(sets) > 1 and sum(len(s) for s in sets) < small * len(sets):
        rows = ((np.concatenate(sets) - mean) / scale).astype(out(sets[0].dtype), copy=False)
        return np.split(rows, np.cumsum([len(s) for s in sets])[:-1])
    return [((s - mean) / scale).astype(out(s.dtype), copy=False) for s in sets]


def count_distinct(blocks, limit: int) -> int:
    """``min(limit, number of distinct rows)`` over the 2-D arrays ``blocks``, reading only as
    many blocks as it takes to find ``limit`` distinct rows."""
    seen = None
    for s in blocks:
        seen = np.unique(s if seen is None else np.concatenate([seen, s]), axis=0)
        if len(seen) >= limit:
            return limit
    return 0 if seen is None else len(seen)


def set_totals(masses: list[np.ndarray]) -> list[np.ndarray]:
    """Each set's elements of positive mass, shared by mass (one 1-D array per set, summing to
    the count): an element of mass 0 counts as removed, in the fit's weights as in transport."""
    return [np.count_nonzero(m) * m for m in masses]


def kmeans_weights(sets, masses, set_weight):
    """Weights of the elements of ``sets`` in the k-means (one 1-D array per set), or ``None``:
    set ``i`` keeps its total ``n_i * set_weight[i]`` (``n_i``: its elements of positive mass),
    shared in proportion to ``masses[i]``."""
    if masses is None and set_weight is None:
        return None
    shared = None if masses is None else set_totals(masses)
    out = []
    for i, s in enumerate(sets):
        w = np.ones(s.shape[0]) if masses is None else shared[i]
        out.append(w if set_weight is None else set_weight[i] * w)
    return out
