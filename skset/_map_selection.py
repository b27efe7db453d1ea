"""Choosing the element map from the data: ``NystromFeatures``' ``"auto"`` parameters.

The Gaussian Nystrom map has four choices that decide what a set embedding can see: per-feature
standardisation, projection on the unit sphere, keeping the norm after that projection, and the
bandwidth relative to the data's scale. No fixed choice serves every kind of data (the real-data
suite, ``benchmarks/bench_suite.py``: a narrow kernel discards the linear information of 100+
feature elements that mean pooling of the raw elements keeps; the sphere helps long k-mers of some
series and hurts others). So each parameter left at ``"auto"`` is chosen in ``fit``:

* with labels (a ``Pipeline`` passes ``y`` to every step), every combination of the automatic
  parameters' candidates is scored by a fast internal cross-validation of *mean-pooled* Nystrom
  features: on a sample of the training sets (and of the elements of each), anchors drawn among
  the sampled elements (the same ones for every candidate), the map, the mean of each set, and
  the leave-one-out squared error of a ridge model on the standardised pooled features (closed
  form from one SVD, one-hot targets for classes, the penalty chosen by the same leave-one-out,
  as ``RidgeClassifierCV`` does). The candidate of
  lowest mean error replaces the fixed choice only when it beats it by more than noise (a paired
  t statistic over the sampled sets above ``MIN_T``); the bandwidth is chosen after the
  preprocessing, by the same rule against the preprocessing's winner;
* without usable labels (``y=None``, one class, fewer than ``_label_tasks.MIN_SETS`` sets, multi-output
  targets), the fixed defaults: standardise, no sphere, bandwidth 0.5 times the scale; classes
  of a single set are left out of the choice (the others still choose).

The pooled-mean score is a proxy for what any pooling on top of the map can separate, and is
cheap: the rule costs a few maps of at most ``MAX_SETS * MAX_PER_SET`` elements and as many SVDs
of at most ``MAX_SETS`` rows, whatever the size of the training data.

``window="auto"`` is chosen first, by the same proxy with the incumbent map (:func:`select_window`):
single elements against k-mers of each width of ``WINDOW_CANDIDATES`` that the training sets
hold twice (all but ``WINDOW_SHORT_SETS`` of them), k-mers only when they beat single elements
by more than noise. The set networks add an order test (:func:`shuffled_kmer_errors`,
:func:`order_statistic`): their k-mers must also beat the k-mers of the same sets shuffled.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from ._label_tasks import _shared_classes, _targets, _task
from ._nystrom_rows import bandwidth_in_range
from ._sets import code_kmers, kmer_span, kmer_windows
from ._stats import beats, weighted_median
from ._weighting import weighted_mean_std
from .nn.nystrom import (
    DEFAULT_BANDWIDTH,
    DEFAULT_KEEP_NORM,
    DEFAULT_NORMALIZE,
    _unit,
    anchor_gram,
    inv_sqrt_psd,
    nystrom_map,
)

__all__ = ["AUTO_CANDIDATES", "DEFAULT_CHOICE", "WINDOW_CANDIDATES", "distinct_rows",
           "has_distinct_rows", "format_window_scores", "select_element_map", "select_window", "median_scale",
           "sample_sets", "unit_rows", "window_candidates"]

# the fixed choice (used without labels, and first in the search so that it wins ties)
DEFAULT_CHOICE = {"standardize": True, "normalize": DEFAULT_NORMALIZE, "keep_norm": DEFAULT_KEEP_NORM,
                  "bandwidth": DEFAULT_BANDWIDTH}
# the candidates of each automatic parameter (the bandwidth relative to the data's scale)
AUTO_CANDIDATES = {
    "standardize": (True, False),
    "normalize": (False, True),
    "keep_norm": (True, False),
    "bandwidth": (0.5, 0.25, 1.0, 2.0),  # the first is the stage-one bandwidth
}
MAX_ANCHORS = 64  # anchors of the candidate maps (the fitted map has n_components)
MAX_SETS = 600
MAX_PER_SET = 64
ALPHAS = np.logspace(-3, 3, 7)
# a candidate replaces the incumbent (first the fixed choice) only when its leave-one-out errors
# are lower by more than noise: a paired t statistic over the sampled sets above MIN_T
MIN_T = 2.0
#: per-set errors of two candidates closer than this (relative to their mean) are one error
ROUNDING = 1e-9


# -- scale-relative thresholds ---------------------------------------------------------------------
# The element map must not depend on the data's absolute scale (the same data at 1e-13 or 1e30,
# float64, gives the same choice and the same features): every threshold on raw elements lives
# here, relative to the data. The sphere projection divides every row of nonzero norm by its norm
# (skset.nn.nystrom._unit, also the map's own); rows are "the same" when equal to 12 significant
# digits of the data's largest magnitude; the standardisation's constant-feature test is relative
# to each feature's magnitude (NystromFeatures.fit), and the pooled features' to their own.
def unit_rows(x: np.ndarray) -> np.ndarray:
    """The rows of ``x`` projected on the unit sphere (a zero row stays zero), scale-free."""
    return _unit(torch.from_numpy(np.ascontiguousarray(x)))[0].numpy()


def distinct_rows(x: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct row of ``x`` (in the order of the sorted
    rows, as ``np.unique``): rows equal to 12 significant digits of ``x``'s largest magnitude
    are one."""
    top = _row_scale(x)
    rounded = x / top
    np.round(rounded, 12, out=rounded)  # in place: one copy of x, not two
    _, first = np.unique(rounded, axis=0, return_index=True)
    return first


def has_distinct_rows(x: np.ndarray, m: int, *, chunk: int = 4096) -> bool:
    """Whether ``x`` has at least ``m`` distinct rows as :func:`distinct_rows` counts them,
    without sorting the rows (which holds several copies of ``x``): each row, rounded as there,
    gets an integer key, the sum modulo 2**64 of its values' bits, each offset by its column and
    mixed (the finaliser of the splitmix64 generator, so that keys do not collide by structure:
    sign flips, values of few mantissa bits); equal rows get equal keys, so ``m`` distinct keys
    prove ``m`` distinct rows (two distinct rows sharing a key can only make this answer
    ``False`` where the exact count would say ``True``). Rows are keyed ``chunk`` at a time."""
    if x.shape[0] < m:
        return False
    top = _row_scale(x)
    offset = np.arange(1, x.shape[1] + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    bits = np.uint32 if x.dtype.itemsize == 4 else np.uint64
    keys = np.empty(x.shape[0], dtype=np.uint64)
    with np.errstate(over="ignore"):  # the products wrap modulo 2**64, as meant
        for a in range(0, x.shape[0], chunk):
            r = x[a:a + chunk] / top
            np.round(r, 12, out=r)
            r += 0.0  # -0.0 -> 0.0: np.unique compares values, the keys compare bits
            h = r.view(bits).astype(np.uint64) + offset
            for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
                h ^= h >> np.uint64(shift)
                h *= np.uint64(mult)
            h ^= h >> np.uint64(31)
            keys[a:a + chunk] = h.sum(1)
    return np.unique(keys).size >= m


def _row_scale(x: np.ndarray) -> float:
    """The largest magnitude of ``x`` (1 where it is 0 or not finite): the unit of
    :func:`distinct_rows`' rounding."""
    top = float(max(x.max(), -x.min())) if x.size else 0.0
    return top if 0.0 < top < np.inf else 1.0


def constant_below(spread: np.ndarray, magnitude) -> np.ndarray:
    """Whether each spread is rounding noise of ``magnitude`` (below ``1e-12`` of it)."""
    return ~(spread > 1e-12 * magnitude)


def loo_ridge_errors(features: np.ndarray, targets: np.ndarray, alphas=ALPHAS) -> np.ndarray:
    """Leave-one-out squared errors, one per sample, of the ridge regression (with intercept) of
    ``targets (n, t)`` on ``features (n, p)`` whose penalty (among ``alphas``, relative to the mean
    squared singular value) has the smallest mean of them. Closed form from one SVD: the
    leave-one-out residual of sample ``i`` is ``r_i / (1 - h_ii)`` with ``H`` the hat matrix
    (plus ``1/n`` for the intercept); errors are summed over the target columns."""
    n = features.shape[0]
    F = features - features.mean(0)
    Y = targets - targets.mean(0)
    # the left singular vectors and squared singular values of F, from the eigendecomposition of
    # the smaller of its two Gram matrices (cheaper than an SVD; tiny eigenvalues dropped)
    if F.shape[0] <= F.shape[1]:
        s2, U = np.linalg.eigh(F @ F.T)
    else:
        s2, V = np.linalg.eigh(F.T @ F)
        U = F @ V
    ref = s2.mean() if s2.size and s2.mean() > 0 else 1.0  # over all min(n, p) values
    keep = s2 > 1e-10 * max(float(s2.max(initial=0.0)), 1e-300)
    s2 = s2[keep]
    U = U[:, keep] if F.shape[0] <= F.shape[1] else U[:, keep] / np.sqrt(s2)
    UtY = U.T @ Y
    best = None
    for a in alphas:
        shrink = s2 / (s2 + a * ref)
        fitted = U @ (shrink[:, None] * UtY)
        h = (U**2) @ shrink + 1.0 / n
        errors = (((Y - fitted) / np.maximum(1.0 - h, 1e-12)[:, None]) ** 2).sum(1)
        if best is None or errors.mean() < best.mean():
            best = errors
    return best


def median_scale(elems: np.ndarray, rng: np.random.RandomState, weights=None) -> float:
    """Median distance of up to 1,000 random pairs of rows, over sqrt(2) (1.0 if it is 0)."""
    m = min(elems.shape[0], 2000)
    pick = rng.choice(elems.shape[0], m, replace=False)
    sub = elems[pick]
    half = m // 2
    diff = sub[:half] - sub[half : 2 * half]
    if not diff.size:
        return 1.0
    # in units of a power of two near the largest difference: squares of 1e-200 underflow
    top = float(np.abs(diff).max())
    unit = float(np.ldexp(1.0, np.frexp(top)[1] - 1)) if 0 < top < np.inf else 1.0
    d2 = ((diff / unit) ** 2).sum(1)
    if weights is not None:  # a pair weighs w_a * w_b
        ws = weights[pick]
        med = weighted_median(d2, ws[:half] * ws[half : 2 * half])
    else:
        med = float(np.median(d2))
    scale = float(np.sqrt(med) / np.sqrt(2)) * unit
    return scale if scale > 0 and np.isfinite(scale) else 1.0


def _sampled_rows(sets, rng, per_set=MAX_PER_SET, window=1, coding="plain", dilation=1):
    """``(rows, owner, inv_counts)``: at most ``per_set`` elements of each set stacked (float64;
    the mean of a sample estimates the set's mean), the set of each row, and one over each set's
    sampled count (for the mean pooling). With ``window > 1`` the rows are k-mers (``dilation``
    apart, as :func:`skset._sets.kmer_index` builds them), coded as ``coding`` says
    (:func:`skset._sets.code_kmers`): only the sampled ones are built, so a long sequence never
    has all its k-mers in memory."""
    rows = []
    span = kmer_span(window, dilation)
    for s in sets:
        n = max(len(s) - span + 1, 1)
        pick = None if n <= per_set else rng.choice(n, per_set, replace=False)
        if window == 1:
            rows.append(s if pick is None else s[pick])
        else:
            starts = np.arange(n) if pick is None else pick
            steps = np.minimum(starts[:, None] + dilation * np.arange(window), len(s) - 1)
            rows.append(code_kmers(s[steps], coding))
    counts = np.array([len(r) for r in rows])
    owner = torch.as_tensor(np.repeat(np.arange(len(rows)), counts), device="cpu")
    inv_counts = torch.as_tensor(1.0 / counts, dtype=torch.float64, device="cpu")[:, None]
    return np.concatenate(rows, axis=0).astype(np.float64), owner, inv_counts


def pooled_map_errors(elems: torch.Tensor, anchors: torch.Tensor, sigma: float, choice: dict,
                      owner: torch.Tensor, inv_counts: torch.Tensor, target: np.ndarray,
                      eigenvalue_floor: float) -> np.ndarray:
    """The proxy's score of one element map: the leave-one-out ridge errors (one per set) of the
    standardised mean of each set's mapped ``elems`` (rows of the sets of ``owner``), the map
    being the Gaussian Nystrom map on ``anchors`` (float64; the map runs in ``elems``' dtype)
    with bandwidth ``sigma`` and ``choice``'s ``normalize`` / ``keep_norm``; infinite errors
    when a value is not finite."""
    if not bandwidth_in_range(sigma, torch.finfo(elems.dtype).dtype):  # a fit would refuse it
        return np.full(inv_counts.shape[0], np.inf)
    norm = inv_sqrt_psd(anchor_gram(anchors, sigma), eigenvalue_floor)
    with torch.no_grad():
        psi = nystrom_map(elems, anchors.to(elems.dtype), norm.to(elems.dtype), sigma,
                          normalize=choice["normalize"], keep_norm=choice["keep_norm"])
        sums = torch.zeros(inv_counts.shape[0], psi.shape[1], dtype=torch.float64, device="cpu")
        pooled = (sums.index_add_(0, owner, psi.double()) * inv_counts).numpy()
    return standardized_loo_errors(pooled, target)


def standardized_loo_errors(features: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The proxy's errors on features ``(n, p)``: each column divided by its deviation (a
    constant one, to rounding of the features' magnitude, stays), then the leave-one-out ridge
    errors of :func:`loo_ridge_errors`; infinite errors when a value is not finite."""
    if not np.all(np.isfinite(features)):  # before the eigendecomposition, which raises on them
        return np.full(len(features), np.inf)
    sd = weighted_mean_std(features)[1]  # squares of values near 1e-200 underflow
    features = features / np.where(constant_below(sd, np.abs(features).max(initial=0.0)), 1.0, sd)
    errors = loo_ridge_errors(features, target)
    return errors if np.all(np.isfinite(errors)) else np.full(len(errors), np.inf)


def candidates(fixed: dict, default: dict | None = None) -> list[dict]:
    """Every combination of the automatic parameters (``fixed`` holds the explicit values), the
    ``default`` one (``DEFAULT_CHOICE`` unless given) first."""
    default = DEFAULT_CHOICE if default is None else default
    names = [k for k in DEFAULT_CHOICE if fixed.get(k, "auto") == "auto"]
    ordered = {k: (default[k],) + tuple(v for v in AUTO_CANDIDATES[k] if v != default[k])
               for k in names}
    out, seen = [], set()
    for values in itertools.product(*(ordered[k] for k in names)):
        c = dict(default)
        c.update({k: v for k, v in fixed.items() if v != "auto"})
        c.update(dict(zip(names, values)))
        if not c["normalize"]:
            c["keep_norm"] = fixed["keep_norm"] if fixed.get("keep_norm", "auto") != "auto" else True
        elif c["keep_norm"] and "keep_norm" in names and not (default["normalize"]
                                                               and default["keep_norm"]):
            # the sphere with the norm kept is searched only from an incumbent that has it (the
            # paper's map): chosen by the proxy on 2 of 24 suite rows, never by more than noise,
            # and its heavy-tailed features slow the Sinkhorn iterations of OTKEmbedding 5-10x
            continue
        key = tuple(c.values())
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def sample_sets(sets, y, rng):
    """A uniform sample of at most ``MAX_SETS`` sets (in their order), and their labels: the one
    rule for both forms (``NystromFeatures`` samples the rows of a 2-D pool with it before they
    become sets of one)."""
    n = len(sets)
    if n <= MAX_SETS:
        return list(sets), np.asarray(y)
    pick = np.sort(rng.choice(n, MAX_SETS, replace=False))
    return [sets[i] for i in pick], np.asarray(y)[pick]


def select_element_map(sets, y, *, mean, scale, window: int, n_components: int, fixed: dict,
                       eigenvalue_floor: float, rng: np.random.RandomState, dtype=torch.float32,
                       default: dict | None = None, dilation: int = 1, target_type: str = "auto"):
    """Choose the automatic parameters of the Nystrom map (``target_type``: how ``y`` is read,
    see :func:`_task`).

    Parameters
    ----------
    sets : list of (n_i, d) float arrays
        The training sets (raw elements). A 2-D pool of elements arrives as its rows, each a set
        of one, already sampled by :func:`sample_sets` (the estimator decides that form).
    y : array-like or None
        One label per set.
    mean, scale : ndarray of shape (d,)
        The per-feature standardisation fitted on the training elements.
    window, n_components, eigenvalue_floor : the map's fixed parameters.
    dilation : int
        The steps between a k-mer's elements (``window > 1``), as the map reads them.
    fixed : dict
        ``standardize``, ``normalize``, ``keep_norm``, ``bandwidth``: each an explicit value or
        ``"auto"``.
    rng : numpy RandomState
    default : dict or None
        The incumbent, taken without usable labels and kept unless a candidate beats it by more
        than noise (``DEFAULT_CHOICE`` when None; the supervised OTK models pass the paper's map).

    Returns
    -------
    choice : dict
        The four parameters (``bandwidth`` relative to the data's scale for an automatic choice).
    scores : list of (dict, float) or None
        Each candidate scored (higher is better: minus the leave-one-out squared error), ``None``
        when the fixed defaults were taken. The search is in two stages: every preprocessing
        (standardisation, sphere, norm) at the first candidate bandwidth, then every candidate
        bandwidth with the best preprocessing.
    """
    cands = candidates(fixed, default)
    task = _task(y, len(sets), target_type)
    if task is None or len(cands) == 1:
        return cands[0], None
    if task == "classification":  # the sets of classes of one set are left out (see _task)
        shared = _shared_classes(np.asarray(y))
        if not shared.all():
            sets, y = [s for s, k in zip(sets, shared) if k], np.asarray(y)[shared]
    sub_sets, sub_y = sample_sets(sets, y, rng)
    if task == "classification" and np.unique(sub_y).size < 2:
        return cands[0], None
    if window > 1:
        sub_sets = kmer_windows(sub_sets, window, dilation=dilation)
        mean_k, scale_k = np.tile(mean, window), np.tile(scale, window)
    else:
        mean_k, scale_k = mean, scale
    raw, owner, inv_counts = _sampled_rows(sub_sets, rng)
    target = _targets(task, sub_y)
    prepared = {}  # (standardize, normalize) -> (elements, anchors, scale)
    # common random numbers: the anchors are the same sampled elements (distinct ones) under every
    # preprocessing, and the distance pairs are drawn alike, so that candidates differ by the
    # preprocessing, not by the draws (and no k-means is run)
    distinct = distinct_rows(raw)
    anchor_pick = rng.choice(distinct, min(n_components, MAX_ANCHORS, len(distinct)), replace=False)
    pair_seed = rng.randint(2**31 - 1)

    def score(c):
        key = (c["standardize"], c["normalize"])
        if key not in prepared:
            if c["standardize"]:
                elems = (raw - mean_k) / scale_k
            else:  # the sphere reads the rows as they are; the Gaussian kernel alone reads
                # differences, so its rows are centred in float64 before the cast to ``dtype``,
                # as the fit centres features far from zero (_offsets.unstandardized_mean)
                elems = raw if c["normalize"] else raw - mean_k
            unit = unit_rows(elems) if c["normalize"] else elems
            anchors = unit[anchor_pick]  # the same elements under every preprocessing
            prepared[key] = (torch.as_tensor(elems, dtype=dtype, device="cpu"),
                             torch.as_tensor(anchors, device="cpu"),
                             median_scale(unit, np.random.RandomState(pair_seed)))
        elems, anchors, data_scale = prepared[key]
        relative = fixed.get("bandwidth", "auto") == "auto" or not c["normalize"]
        sigma = c["bandwidth"] * data_scale if relative else c["bandwidth"]
        return pooled_map_errors(elems, anchors, sigma, c, owner, inv_counts, target,
                                 eigenvalue_floor)

    def stage(group, incumbent):
        """The candidate of ``group`` with the lowest mean error, if it beats the incumbent by
        more than noise; else the incumbent."""
        scored = [(c, score(c)) for c in group]
        if incumbent is None:
            incumbent = scored[0]
        best = min(scored, key=lambda ce: ce[1].mean())
        # errors: lower is better (the incumbent's first); differences within ROUNDING of the
        # errors are none (two candidates that are one map, as standardised or not on one
        # feature, differ by rounding alone, whose t is noise: the choice followed the scale)
        # (the map runs in ``dtype``: in float32 its rounding moves an error by up to 1e-5)
        flat = max(ROUNDING, 1000 * torch.finfo(dtype).eps) * float(np.abs(incumbent[1]).mean())
        return (best if beats(incumbent[1], best[1], MIN_T, flat=flat) else incumbent), scored

    # two stages: the preprocessing at the first candidate bandwidth, then the bandwidth
    first_bw = cands[0]["bandwidth"]
    lead, scored = stage([c for c in cands if c["bandwidth"] == first_bw], None)
    more = [c for c in cands if c["bandwidth"] != first_bw
            and all(c[k] == lead[0][k] for k in ("standardize", "normalize", "keep_norm"))]
    if more:
        lead, scored2 = stage(more, lead)
        scored += scored2
    scores = [(c, -float(e.mean())) for c, e in scored]
    return lead[0], scores


# -- the k-mer width ----------------------------------------------------------------------------
#: the k-mer widths ``window="auto"`` compares with single elements (1, the incumbent); a width is
#: a candidate when all training sets but ``WINDOW_SHORT_SETS`` of them (rounded down) have at
#: least twice as many elements
WINDOW_CANDIDATES = (3, 5, 10, 20)
#: the share of training sets that may be too short to hold a candidate width twice (a fitted map
#: reads a set shorter than its k-mers as one k-mer, its last element repeated): one truncated
#: recording among hundreds no longer turns k-mers off. Under 100 sets none may be; on the
#: suite it adds widths on GeneFamilies (10, 20: 1 and 4 of 700 sequences too short), DigitPoints
#: (20: 4 of 500) and MNISTBags500 (3: 4 of 500)
WINDOW_SHORT_SETS = 0.01
#: elements (k-mers) per set the width's proxy maps: more than the map's MAX_PER_SET, since the
#: widths differ by what long series show in their k-mers. On the suite's univariate series
#: (mean of seeds 0-2), 256 against 64: GeneFamilies 50.5 -> 56.1, WatchMagnitude 65.1 -> 68.3,
#: ArrowHead 80.8 -> 84.0, PickupGestureWiimoteZ 58.0 -> 60.7, ACSF1 87.7 -> 85.7 (one seed
#: kept single elements); every bag row kept single elements with both
WINDOW_PER_SET = 256
#: values (k-mers x their coded features) one width's proxy maps at most: its k-mers per set are
#: cut below ``WINDOW_PER_SET`` for wide k-mers of many features (256 MiB in float64; 20-mers of
#: 120 features in 600 sets would be 3 GiB). On the suite the most is WatchWindows' 20-mers,
#: 17.5 million values, so no suite fit is cut
WINDOW_MAX_VALUES = 2**25
#: the dilated k-mers ``(width, dilation)`` that ``dilation="auto"`` scores once ``window="auto"``
#: has taken k-mers: elements ``dilation`` steps apart reach further along a series with few
#: coordinates. A pair is a candidate when its span ``(width - 1) * dilation + 1`` is at most
#: ``DILATED_MAX_SPAN`` of the median training length (a shorter set has one k-mer, its last
#: element repeated). On PickupGestureWiimoteZ (MiniRocket 88.0), 3:16 and 5:16 read the gestures
#: at 84.0 (benchmarks/results/dilated_kmers.md) where contiguous k-mers read 74.0-74.7.
DILATED_CANDIDATES = ((10, 2), (10, 4), (10, 8), (10, 16), (5, 8), (5, 16), (5, 32), (3, 16))
DILATED_MAX_SPAN = 2 / 3
#: a dilated pair replaces the chosen width only above this paired t: eight pairs are compared
#: with one width, and the largest of eight noisy statistics passes 2.0 far more often than one
#: (the one-sided 5% level for the largest of eight is about 2.5)
MIN_T_DILATED = 3.0


def kmers_per_set(n_sets: int, window: int, n_features: int, kmer_coding: str, budget: int,
                  groups: int = 1) -> int:
    """k-mers per set a proxy samples so that ``groups`` groups of ``n_sets`` sets hold at most
    ``budget`` values (k-mers x their coded features): ``WINDOW_PER_SET`` where they fit, never
    fewer than 8."""
    width = n_features * (1 if window == 1 else window + (kmer_coding == "level_shape"))
    return int(np.clip(budget // max(groups * n_sets * width, 1), 8, WINDOW_PER_SET))


def window_candidates(lengths, dilation: int = 1) -> list[int]:
    """1, then the widths of ``WINDOW_CANDIDATES`` that the sets of ``lengths`` hold twice (a
    set of ``n`` elements keeps more than half of them as k-mers: ``n - w + 1 > n / 2``), all but
    a share ``WINDOW_SHORT_SETS`` of them, rounded down (every set, under 100 sets); with
    ``dilation > 1`` (an explicit dilation, whose k-mers a shorter set also has: one), those
    whose span is at most ``DILATED_MAX_SPAN`` of the median length, as the dilated pairs."""
    if not len(lengths):
        return [1]
    if dilation > 1:
        room = DILATED_MAX_SPAN * float(np.median(lengths))
        return [1] + [w for w in WINDOW_CANDIDATES if kmer_span(w, dilation) <= room]
    # the length all sets but the allowed short ones reach
    room = int(np.sort(np.asarray(lengths))[int(WINDOW_SHORT_SETS * len(lengths))])
    return [1] + [w for w in WINDOW_CANDIDATES if 2 * w <= room]


def dilated_candidates(lengths) -> list[tuple[int, int]]:
    """The ``(width, dilation)`` pairs of ``DILATED_CANDIDATES`` whose span is at most
    ``DILATED_MAX_SPAN`` of the median length of ``lengths``."""
    if not len(lengths):
        return []
    room = DILATED_MAX_SPAN * float(np.median(lengths))
    return [(k, d) for k, d in DILATED_CANDIDATES if kmer_span(k, d) <= room]


def format_window_scores(scores) -> str:
    """:func:`select_window`'s scores as ``verbose`` prints them: ``"1: -0.6131, 10:2: -0.3870,
    ..."`` (a dilated pair as ``width:dilation``)."""
    return ", ".join(f"{':'.join(map(str, k)) if isinstance(k, tuple) else k}: {v:.4f}"
                     for k, v in scores)


#: shuffled copies of each sampled set whose k-mers the order test scores
ORDER_SHUFFLES = 5
#: the copies where the order test alone shows order, for dilated k-mers taken where no
#: contiguous width passed: on PickupGestureWiimoteZ at seeds 0-8 the statistic with 19 copies
#: is 4.2 to 8.9, and 5 refused the pairs at seed 4; unordered bags pass no more often with 19
#: (``benchmarks/results/order_test.md``)
ORDER_SHUFFLES_PAIRS = 19
#: the order test keeps k-mers above this :func:`order_statistic`
MIN_T_ORDER = 3.0
#: values (k-mers x their coded features, all groups together) the order test maps at most: its
#: k-mers per set are cut below ``WINDOW_PER_SET`` for wide k-mers of many sets (128 MiB in
#: float64; on the suite only OSULeaf's 5-mers of 10-mers are cut, to 233 per set)
ORDER_MAX_VALUES = 2**24


def kmer_errors(groups, choice: dict, target: np.ndarray, *, n_components: int,
                eigenvalue_floor: float, rng: np.random.RandomState, dtype) -> list[np.ndarray]:
    """The proxy's errors of each group ``(rows, owner, inv_counts)`` of :func:`_sampled_rows`
    (the same sets, each group read another way) under one element map: the rows of all groups
    standardised by their joint mean and deviation when ``choice["standardize"]``, projected on
    the sphere when ``choice["normalize"]``, anchors drawn among the distinct rows of all groups
    and the bandwidth from their joint scale, then :func:`pooled_map_errors` of each group."""
    raw = np.concatenate([g[0] for g in groups], axis=0)
    mean, sd = weighted_mean_std(raw)
    if choice["standardize"]:
        elems = (raw - mean) / np.where(constant_below(sd, np.abs(raw).max(0)), 1.0, sd)
    else:
        elems = raw if choice["normalize"] else raw - mean  # see select_element_map's score
    if choice["normalize"]:
        elems = unit_rows(elems)
    distinct = distinct_rows(elems)
    anchors = torch.as_tensor(elems[rng.choice(distinct, min(n_components, MAX_ANCHORS,
                                                             len(distinct)), replace=False)],
                              device="cpu")
    sigma = choice["bandwidth"] * median_scale(elems, rng)
    bounds = np.cumsum([0] + [len(g[0]) for g in groups])
    return [pooled_map_errors(torch.as_tensor(elems[a:b], dtype=dtype, device="cpu"), anchors,
                              sigma, choice, owner, inv_counts, target, eigenvalue_floor)
            for (a, b), (_, owner, inv_counts) in zip(zip(bounds[:-1], bounds[1:]), groups)]


def shuffled_kmer_errors(sets, target, window: int, dilation: int, kmer_coding: str,
                         choice: dict, *, n_components: int, eigenvalue_floor: float,
                         rng: np.random.RandomState, dtype, copies: int = ORDER_SHUFFLES
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The order test's errors: the proxy's errors of the k-mers of ``sets`` as given
    ``(n_sets,)``, and those of ``copies`` copies of the sets with their elements
    shuffled (each set by its own permutation) ``(copies, n_sets)``, every group
    standardised, mapped and pooled alike (anchors, bandwidth and standardisation from all
    groups: :func:`kmer_errors`). When the order of a set's elements is arbitrary
    (exchangeable), the sets and their copies are drawn from the same law and treated alike,
    so the mean error of the sets is one more draw among those of the copies. At most
    ``WINDOW_PER_SET`` k-mers per set and group, fewer where all groups would hold more than
    ``ORDER_MAX_VALUES`` values."""
    per_set = kmers_per_set(len(sets), window, sets[0].shape[1], kmer_coding, ORDER_MAX_VALUES,
                            copies + 1)
    groups = [_sampled_rows(sets, rng, per_set, window, kmer_coding, dilation)]
    for _ in range(copies):
        shuffled = [s[rng.permutation(len(s))] for s in sets]
        groups.append(_sampled_rows(shuffled, rng, per_set, window, kmer_coding, dilation))
    errors = kmer_errors(groups, choice, target, n_components=n_components,
                         eigenvalue_floor=eigenvalue_floor, rng=rng, dtype=dtype)
    return errors[0], np.stack(errors[1:])


def order_statistic(errors: np.ndarray, shuffled: np.ndarray) -> float:
    """How far the mean error of the sets as given lies under those of the shuffled copies, in
    the copies' own spread: ``(mean of the copies' means - the sets' mean) / (sd of the copies'
    means * sqrt(1 + 1 / copies))``; under exchangeability a Student t with ``copies - 1``
    degrees of freedom (the sets' mean is one more draw of the copies' law). Per-set errors
    are not paired across groups here: they share one ridge fit per group, so a paired t over
    the sets counts one group's luck as many sets' evidence (on one draw of Normal Var's i.i.d.
    sets, over 30 random streams, a paired t centred at 2.15 and above 2 in 16; this statistic
    centred at 1.24 and above 3 in 2: ``benchmarks/bench_order_test.py --null``)."""
    means = shuffled.mean(1)
    gap = float(means.mean() - errors.mean())
    spread = float(means.std(ddof=1)) * np.sqrt(1.0 + 1.0 / len(means))
    if not np.isfinite(gap) or not np.isfinite(spread):
        return -np.inf
    return gap / spread if spread > 0 else (np.inf if gap > 0 else -np.inf)


def select_window(sets, y, *, kmer_coding: str, fixed: dict, default: dict, n_components: int,
                  eigenvalue_floor: float, rng: np.random.RandomState, dtype=torch.float32,
                  dilate: bool = False, order_test: bool = False, target_type: str = "auto",
                  dilation: int = 1, pairs_alone: bool = True):
    """Choose the k-mer width of ``window="auto"`` from the labels (and, with ``dilate``, the
    dilation of ``dilation="auto"``; else the widths are read ``dilation`` apart, an explicit
    ``dilation``; ``target_type``: how ``y`` is read, see :func:`_task`).

    Each width of :func:`window_candidates` (the first, 1, the incumbent) is scored by the proxy
    of :func:`select_element_map` with the map fixed (``fixed``'s explicit values, ``default``'s
    for its ``"auto"`` ones): on a sample of the training sets (classes of one set left out), the
    k-mers of each (coded as ``kmer_coding`` says; the sets themselves for 1), at most
    ``WINDOW_PER_SET`` of them per set (fewer where a width's k-mers would hold more than
    ``WINDOW_MAX_VALUES`` values),
    standardised by their own mean and deviation when ``choice["standardize"]``, projected on
    the sphere when ``choice["normalize"]``, mapped on anchors drawn among them, mean-pooled,
    and the leave-one-out squared error of a ridge model on the pooled features. A width
    replaces 1 only when it beats it by more than noise (a paired t statistic over the sampled
    sets above ``MIN_T``), and of the widths that do, the one of lowest mean error is taken:
    k-mers are taken when the data say that order matters.

    With ``dilate``, the dilated k-mers of :func:`dilated_candidates` are scored next on the
    same sampled sets; one replaces the width taken only when it beats it by a paired t above
    ``MIN_T_DILATED`` (the lowest mean error of those that do). With ``pairs_alone`` too, they
    are scored where no width was taken (or none fits the sets twice: short sets),
    against single elements, by the same margin, and must
    then also pass the order test below (with or without ``order_test``; without it, on
    ``ORDER_SHUFFLES_PAIRS`` shuffled copies): on
    PickupGestureWiimoteZ's 50 training gestures the contiguous widths beat single elements by
    t of 0.2-2.8 and the dilated pairs by 4-8, so that whether k-mers were read at all turned on
    the draw.

    With ``order_test`` and k-mers taken, they are kept only when the order of the elements
    means something (:func:`shuffled_kmer_errors`): the k-mers of the sets as given must beat
    the k-mers of shuffled copies of the same sets by an :func:`order_statistic` above
    ``MIN_T_ORDER``; else ``window`` and ``dilation`` are 1 (the set networks' rule: they are
    permutation invariant by design, and k-mers of sets whose order is arbitrary throw that
    away).

    Returns
    -------
    window, dilation : int
    scores : list of (int or (int, int) or "shuffled", float) or None
        Each width (or ``(width, dilation)`` pair) and its score (minus the mean leave-one-out
        error; higher is better; ``"shuffled"``: the order test's shuffled k-mers), or ``None``
        without usable labels or candidates (then ``window`` and ``dilation`` are 1).
    """
    lengths = [len(s) for s in sets]
    step = 1 if dilate else int(dilation)  # the dilation the widths are read with
    widths = window_candidates(lengths, step)
    # the dilated pairs fit the median length: sets too short for any contiguous width (a
    # width must fit all but 1% of them twice) leave them to be scored against single elements
    pairs = dilated_candidates(lengths) if dilate else []
    choice = {k: default[k] if fixed.get(k, "auto") == "auto" else fixed[k] for k in default}
    task = _task(y, len(sets), target_type)
    if task is None or (len(widths) < 2 and not (pairs and pairs_alone)):
        return 1, 1, None
    if task == "classification":
        shared = _shared_classes(np.asarray(y))
        if not shared.all():
            sets, y = [s for s, k in zip(sets, shared) if k], np.asarray(y)[shared]
    sub_sets, sub_y = sample_sets(sets, y, rng)
    if task == "classification" and np.unique(sub_y).size < 2:
        return 1, 1, None
    target = _targets(task, sub_y)

    def errors_of(w, dilation=1):
        per_set = kmers_per_set(len(sub_sets), w, sub_sets[0].shape[1], kmer_coding,
                                WINDOW_MAX_VALUES)
        return kmer_errors([_sampled_rows(sub_sets, rng, per_set, w, kmer_coding,
                                          dilation)], choice, target, n_components=n_components,
                           eigenvalue_floor=eigenvalue_floor, rng=rng, dtype=dtype)[0]

    scored = [(w, errors_of(w, step if w > 1 else 1)) for w in widths]
    # the width of lowest mean error among those that beat single elements by more than noise
    # (the lowest overall may not: on ACSF1, seed 0, 3-mers had the lowest mean error at t = 1.75
    # and 5-mers t = 2.04, and single elements scored 80.0 on the test sets against 88.0 for
    # 5-mers at the seed that took them)
    passing = [we for we in scored[1:] if beats(scored[0][1], we[1], MIN_T, flat=0.0)]
    chosen = min(passing, key=lambda we: we[1].mean()) if passing else scored[0]
    window = chosen[0]
    dilation = step if window > 1 else 1
    contiguous = window > 1
    if dilate and (contiguous or pairs_alone):  # against the width taken, or single elements
        dilated = [(kd, errors_of(*kd)) for kd in pairs]
        scored += dilated
        passing = [we for we in dilated if beats(chosen[1], we[1], MIN_T_DILATED, flat=0.0)]
        if passing:
            window, dilation = min(passing, key=lambda we: we[1].mean())[0]
    # dilated k-mers taken where no contiguous width was must also pass the order test: the
    # widths' own test against single elements was not passed, so order has not been shown
    if (order_test or not contiguous) and window > 1:
        shuffled = shuffled_kmer_errors(sub_sets, target, window, dilation, kmer_coding, choice,
                                        n_components=n_components,
                                        eigenvalue_floor=eigenvalue_floor, rng=rng, dtype=dtype,
                                        copies=ORDER_SHUFFLES if order_test else ORDER_SHUFFLES_PAIRS)
        scored.append(("shuffled", shuffled[1].mean(0)))
        if order_statistic(*shuffled) <= MIN_T_ORDER:
            window, dilation = 1, 1
    def name(w):  # an explicit dilation's widths are the pairs they are
        return (w, step) if step > 1 and isinstance(w, int) and w > 1 else w

    return window, dilation, [(name(w), -float(e.mean())) for w, e in scored]
