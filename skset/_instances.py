"""Clustering instances drawn from a labelled pool of elements.

Shared by :func:`skset.datasets.sample_clustering_instances` (which returns them) and
:class:`skset.cluster.ABCClusterer` (which draws its training instances from a pool).
"""

from __future__ import annotations

import numbers

import numpy as np

from ._sets import missing_labels


def _composition(rng, n: int, k: int) -> np.ndarray:
    """``k`` positive integers summing to ``n``, uniform over such compositions."""
    cuts = np.sort(rng.choice(np.arange(1, n), size=k - 1, replace=False)) if k > 1 else []
    return np.diff(np.concatenate([[0], cuts, [n]])).astype(np.int64)


def _sample_instance(rng, by_class: list[np.ndarray], n_elements: int, k_lo: int, k_hi: int):
    k = int(rng.randint(k_lo, k_hi + 1))
    classes = rng.choice(len(by_class), size=k, replace=False)
    sizes = _composition(rng, n_elements, k)
    idx, lab = [], []
    for c, (cls, size) in enumerate(zip(classes, sizes, strict=True)):
        members = by_class[cls]
        idx.append(rng.choice(members, size=size, replace=size > len(members)))
        lab.append(np.full(size, c, dtype=np.int64))
    idx, lab = np.concatenate(idx), np.concatenate(lab)
    perm = rng.permutation(n_elements)
    return idx[perm], lab[perm]


def _check_pool(X, y):
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D pool of elements (N, d), got shape {X.shape}.")
    if X.dtype.kind in "fc" and not np.isfinite(X).all():
        raise ValueError("X contains NaN or infinity; the instances need finite values.")
    if y.ndim != 1 or len(y) != len(X):
        raise ValueError(f"y must hold one label per element of X ({len(X)}), got shape "
                         f"{y.shape}.")
    missing = missing_labels(y)
    if missing.any():  # np.unique made each NaN a class of its own
        raise ValueError(f"y has a missing label (NaN or None) at element "
                         f"{int(np.flatnonzero(missing)[0])}; every element needs its class.")
    classes, y_idx = np.unique(y, return_inverse=True)
    by_class = [np.flatnonzero(y_idx == c) for c in range(len(classes))]
    return X, y, by_class


def _check_cluster_range(n_clusters, n_classes: int, n_elements: int, name: str = "n_clusters"):
    def whole(v):
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)

    if whole(n_clusters):
        lo = hi = int(n_clusters)
    else:  # a pair of ints: no string ("13" read as (1, 3)), no float truncated
        pair = None if isinstance(n_clusters, str) else np.asarray(n_clusters, dtype=object).ravel()
        if pair is None or len(pair) != 2 or not all(whole(v) for v in pair):
            raise ValueError(f"{name} must be an int or a (min, max) pair of ints, got "
                             f"{n_clusters!r}.")
        lo, hi = int(pair[0]), int(pair[1])
    if not 1 <= lo <= hi:
        raise ValueError(f"{name} range must satisfy 1 <= min <= max, got {n_clusters!r}.")
    if hi > n_classes:
        raise ValueError(f"{name} up to {hi} needs at least {hi} classes in the pool, which "
                         f"has {n_classes}.")
    if hi > n_elements:
        raise ValueError(f"{name} up to {hi} cannot fit in instances of {n_elements} "
                         "elements.")
    return lo, hi
