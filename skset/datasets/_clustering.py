"""Clustering problems made of many small labelled instances (the ABC paper's protocols).

* :func:`make_circles_instances`: points on four overlapping circles (ABC, Section 6.1).
* :func:`sample_clustering_instances`: instances drawn from a labelled pool as in ABC's Appendix B
  (a random number of clusters, classes without replacement, random cluster sizes >= 1).
* :func:`load_digits_split`: scikit-learn's digits split into seen and unseen classes.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils import Bunch, check_random_state

from .._instances import _check_cluster_range, _check_pool, _sample_instance
from ._synthetic import _real_pair

__all__ = ["make_circles_instances", "sample_clustering_instances", "load_digits_split"]


def _check_int(value, name, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")
    return int(value)


def make_circles_instances(
    n_instances: int = 100,
    n_points: int = 100,
    *,
    n_circles: int | tuple[int, int] = 4,
    radius_range: tuple[float, float] = (0.3, 1.0),
    noise: float = 0.0,
    random_state=None,
):
    """Instances of points lying on overlapping circles, labelled by circle (ABC, Section 6.1).

    For each instance, ``n_circles`` circles are drawn one after the other: the first has its
    centre uniform in ``[-1, 1]^2``; every later one picks an earlier circle ``j`` at random and is
    placed at a distance from it drawn uniformly in ``(|r - r_j|, r + r_j)`` (shrunk by 10% at both
    ends), so that it **crosses** circle ``j``: every circle overlaps at least one other. Radii are
    uniform in ``radius_range``. Each point picks a circle uniformly at random and an angle
    uniformly on it; ``noise`` adds isotropic Gaussian noise of that standard deviation. The
    coordinates are centred on the instance's mean.

    Parameters
    ----------
    n_instances : int, default=100
    n_points : int, default=100
        Points per instance.
    n_circles : int or (int, int), default=4
        Circles per instance, or an inclusive range ``(low, high)`` drawn uniformly per instance
        (the ABC paper's ablation trains on 2-5 circles).
    radius_range : (float, float), default=(0.3, 1.0)
    noise : float, default=0.0
    random_state : int, RandomState or None, default=None

    Returns
    -------
    X : list of ndarray of shape (n_points, 2)
    y : list of ndarray of shape (n_points,)
        The circle of each point, ``0 .. n_circles - 1`` (a circle may get no point when
        ``n_points`` is small).

    Examples
    --------
    >>> from skset.datasets import make_circles_instances
    >>> X, y = make_circles_instances(3, 50, random_state=0)
    >>> len(X), X[0].shape, sorted(set(y[0].tolist()))
    (3, (50, 2), [0, 1, 2, 3])
    """
    n_instances = _check_int(n_instances, "n_instances", 0)
    n_points = _check_int(n_points, "n_points", 1)
    if isinstance(n_circles, (tuple, list)):
        if len(n_circles) != 2:
            raise ValueError(f"n_circles must be an int or a (low, high) pair, got {n_circles!r}.")
        c_lo, c_hi = (_check_int(v, "n_circles", 1) for v in n_circles)
        if c_lo > c_hi:
            raise ValueError(f"n_circles range must satisfy low <= high, got {n_circles!r}.")
    else:
        c_lo = c_hi = _check_int(n_circles, "n_circles", 1)
    if not (_real_pair(radius_range) and 0 < radius_range[0] <= radius_range[1]):
        raise ValueError(f"radius_range must satisfy 0 < low <= high < inf, got {radius_range!r}.")
    r_lo, r_hi = (float(v) for v in radius_range)
    if isinstance(noise, bool) or not (isinstance(noise, numbers.Real) and noise >= 0
                                         and np.isfinite(noise)):  # NaN too
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}.")
    rng = check_random_state(random_state)
    X, Y = [], []
    for _ in range(n_instances):
        # a fixed count draws nothing here, so its instances are those of earlier versions
        n_circles = c_lo if c_lo == c_hi else int(rng.randint(c_lo, c_hi + 1))
        radii = rng.uniform(r_lo, r_hi, n_circles)
        centres = np.zeros((n_circles, 2))
        centres[0] = rng.uniform(-1, 1, 2)
        for c in range(1, n_circles):
            j = rng.randint(c)
            lo, hi = abs(radii[c] - radii[j]), radii[c] + radii[j]
            dist = rng.uniform(lo + 0.1 * (hi - lo), hi - 0.1 * (hi - lo))
            theta = rng.uniform(0, 2 * np.pi)
            centres[c] = centres[j] + dist * np.array([np.cos(theta), np.sin(theta)])
        labels = rng.randint(n_circles, size=n_points)
        angles = rng.uniform(0, 2 * np.pi, n_points)
        pts = centres[labels] + radii[labels, None] * np.column_stack([np.cos(angles),
                                                                       np.sin(angles)])
        if noise > 0:
            pts = pts + rng.normal(0, noise, pts.shape)
        X.append(pts - pts.mean(0))
        Y.append(labels.astype(np.int64))
    return X, Y


def sample_clustering_instances(X, y, n_instances: int, n_elements: int = 100,
                                n_clusters=(2, 4), *, random_state=None):
    """Draw labelled clustering instances from a labelled pool (ABC, Appendix B).

    Each instance: ``k`` uniform in the ``n_clusters`` range; ``k`` classes drawn without
    replacement; cluster sizes a uniformly random composition of ``n_elements`` into ``k`` parts
    (every cluster gets at least one element, so tiny clusters are common); elements drawn from
    each class without replacement (with replacement only when the class is too small); the
    elements are shuffled. Labels are ``0 .. k - 1``.

    Parameters
    ----------
    X : ndarray of shape (N, d)
    y : ndarray of shape (N,)
    n_instances : int
    n_elements : int, default=100
    n_clusters : int or (int, int), default=(2, 4)
        Number of clusters, or the inclusive range it is drawn from.
    random_state : int, RandomState or None

    Returns
    -------
    X_instances : list of ndarray of shape (n_elements, d)
    y_instances : list of ndarray of shape (n_elements,)
    """
    X, y, by_class = _check_pool(X, y)
    n_instances = _check_int(n_instances, "n_instances", 0)
    n_elements = _check_int(n_elements, "n_elements", 1)
    lo, hi = _check_cluster_range(n_clusters, len(by_class), n_elements)
    rng = check_random_state(random_state)
    Xs, ys = [], []
    for _ in range(n_instances):
        idx, lab = _sample_instance(rng, by_class, n_elements, lo, hi)
        Xs.append(X[idx])
        ys.append(lab)
    return Xs, ys


_DIHEDRAL = ("id", "rot90", "rot180", "rot270", "flip", "flip_rot90", "flip_rot180",
             "flip_rot270")


def _dihedral(images: np.ndarray, t: int) -> np.ndarray:
    """Transform ``t`` (0-7, see ``_DIHEDRAL``) of the dihedral group on (N, h, w) images."""
    if t >= 4:
        images = images[:, :, ::-1]
    return np.rot90(images, t % 4, axes=(1, 2))


def load_digits_split(seen=(0, 1, 2, 3, 4, 5), unseen=(6, 7, 8, 9), *, augment=None):
    """scikit-learn's 8x8 digits, split by class into seen (training) and unseen (test) pools.

    Pixel values are scaled to ``[0, 1]``. The protocol of the ABC benchmark: train on the seen
    classes, then cluster instances (:func:`sample_clustering_instances`) of unseen classes only.

    Parameters
    ----------
    seen, unseen : sequence of int
        Digits of the two pools (disjoint).
    augment : None, "rot4" or "dihedral", default=None
        Multiply the **seen** classes into pseudo-classes, as done for Omniglot in few-shot
        learning: each (digit, transform) pair becomes a class of its own, so that a clustering
        model trained on the seen pool meets many more classes than the handful of digits and
        is pushed to learn a similarity rather than a classifier. ``"rot4"``: the images rotated
        by 0, 90, 180 and 270 degrees (4 pseudo-classes per digit); ``"dihedral"``: those and
        their mirror images (8 per digit). The unseen pool is never transformed. Digits that are
        (nearly) symmetric under a transform (0, 1, 8 under some of them) give pseudo-classes that
        look alike; they are kept as distinct classes.

    Returns
    -------
    Bunch with ``X_seen``, ``y_seen``, ``X_unseen``, ``y_unseen`` (float64 features of 64
    pixels, int labels: the digits themselves; with ``augment``, ``y_seen`` is
    ``digit * n_transforms + transform``, ``transform`` 0 being the identity) and
    ``transforms`` (the names of the transforms, ``("id",)`` without ``augment``).

    Examples
    --------
    >>> from skset.datasets import load_digits_split
    >>> b = load_digits_split(augment="dihedral")
    >>> len(set(b.y_seen.tolist())), b.X_seen.shape[1], len(set(b.y_unseen.tolist()))
    (48, 64, 4)
    """
    from sklearn.datasets import load_digits

    seen, unseen = np.asarray(seen), np.asarray(unseen)
    if np.intersect1d(seen, unseen).size:
        raise ValueError("seen and unseen classes overlap.")
    for name, digits in (("seen", seen), ("unseen", unseen)):
        if not (digits.size and np.isin(digits, np.arange(10)).all()):
            raise ValueError(f"{name}={digits.tolist()} must name digits among 0-9.")
    n_t = {None: 1, "rot4": 4, "dihedral": 8}.get(augment)
    if n_t is None:
        raise ValueError(f"augment must be None, 'rot4' or 'dihedral', got {augment!r}.")
    d = load_digits()
    X = d.data / 16.0
    s, u = np.isin(d.target, seen), np.isin(d.target, unseen)
    Xs, ys = X[s], d.target[s]
    if n_t > 1:
        imgs = Xs.reshape(-1, 8, 8)
        Xs = np.concatenate([_dihedral(imgs, t).reshape(len(imgs), 64) for t in range(n_t)])
        ys = np.concatenate([ys * n_t + t for t in range(n_t)])
    return Bunch(X_seen=np.ascontiguousarray(Xs), y_seen=ys, X_unseen=X[u],
                 y_unseen=d.target[u], transforms=_DIHEDRAL[:n_t])
