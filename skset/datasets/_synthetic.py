"""Synthetic set tasks of the Set Transformer and Deep Sets++ papers."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["make_max_regression", "make_normal_var", "make_gaussian_mixture_sets",
           "make_unique_count"]


def _size_range(set_size, name: str = "set_size") -> tuple[int, int]:
    """The inclusive ``(low, high)`` of ``set_size``: an int (both) or a pair of ints."""
    if isinstance(set_size, Integral) and not isinstance(set_size, bool):
        if set_size < 1:
            raise ValueError(f"{name}={set_size} must be >= 1.")
        return int(set_size), int(set_size)
    pair = None if isinstance(set_size, str) else np.asarray(set_size, dtype=object).ravel()
    if pair is None or len(pair) != 2 or not all(
            isinstance(v, Integral) and not isinstance(v, bool) for v in pair):
        raise ValueError(f"{name}={set_size!r} must be an int or a (low, high) pair of ints.")
    low, high = int(pair[0]), int(pair[1])
    if not 1 <= low <= high:
        raise ValueError(f"{name}={set_size!r} needs 1 <= low <= high.")
    return low, high


def _sizes(set_size, n_sets: int, rng, name: str = "set_size") -> np.ndarray:
    """Set sizes: an int (all equal) or an inclusive ``(low, high)`` range drawn uniformly."""
    low, high = _size_range(set_size, name)
    if isinstance(set_size, Integral):  # one size: nothing drawn
        return np.full(n_sets, low, dtype=np.int64)
    return rng.randint(low, high + 1, size=n_sets).astype(np.int64)


def _real(v) -> bool:
    """Whether ``v`` is a finite real number (not a bool, a string or an array)."""
    return isinstance(v, Real) and not isinstance(v, bool) and bool(np.isfinite(v))


def _real_pair(v) -> bool:
    """Whether ``v`` is a ``(low, high)`` pair of finite real numbers."""
    try:
        return len(v) == 2 and all(_real(x) for x in v)
    except TypeError:
        return False


def _check_n_sets(n_sets) -> int:
    if isinstance(n_sets, bool) or not isinstance(n_sets, Integral) or n_sets < 1:
        raise ValueError(f"n_sets={n_sets!r} must be a positive integer.")
    return int(n_sets)


def make_max_regression(
    n_sets: int = 1000,
    *,
    set_size=(1, 10),
    n_features: int = 1,
    low: float = 0.0,
    high: float = 1.0,
    random_state=None,
):
    """Sets of uniform numbers; the target is the maximum of each set.

    The max-regression task of Lee et al. (2019): a pooling that averages (mean/sum) must learn
    to approximate a max, attention pooling can select it.

    Parameters
    ----------
    n_sets : int, default=1000
    set_size : int or (int, int), default=(1, 10)
        A fixed size, or an inclusive range drawn uniformly per set.
    n_features : int, default=1
        Features per element; the target has one maximum per feature (2-D when ``> 1``).
    low, high : float, default=0.0, 1.0
        Elements are drawn from ``U[low, high]``.
    random_state : int, RandomState or None

    Returns
    -------
    X : list of ndarray of shape (n_i, n_features)
    y : ndarray of shape (n_sets,) or (n_sets, n_features)

    Examples
    --------
    >>> from skset.datasets import make_max_regression
    >>> X, y = make_max_regression(3, set_size=4, random_state=0)
    >>> bool(y[0] == X[0].max())
    True
    """
    n_sets = _check_n_sets(n_sets)
    if isinstance(n_features, bool) or not isinstance(n_features, Integral) or n_features < 1:
        raise ValueError(f"n_features={n_features!r} must be a positive integer.")
    if not (_real(low) and _real(high) and high > low):
        raise ValueError(f"high={high!r} must be greater than low={low!r}, both finite numbers.")
    rng = check_random_state(random_state)
    sizes = _sizes(set_size, n_sets, rng)
    X = [rng.uniform(low, high, size=(int(n), n_features)) for n in sizes]
    y = np.stack([x.max(0) for x in X])
    return X, (y[:, 0] if n_features == 1 else y)


def make_normal_var(
    n_sets: int = 1000,
    *,
    set_size=1000,
    mean_range: tuple[float, float] = (-10.0, 10.0),
    var_range: tuple[float, float] = (0.0, 10.0),
    ddof: int = 0,
    random_state=None,
):
    """Normal Var: sets of samples of ``N(mu, sigma^2)``; the target is their empirical variance.

    ``mu ~ U[-10, 10]`` and ``sigma^2 ~ U[0, 10]`` per set, as in Zhang et al. (2022), Section 6
    (1000 samples per set, 10,000 training and 1,000 test sets in the paper).

    Parameters
    ----------
    n_sets : int, default=1000
    set_size : int or (int, int), default=1000
        A fixed size or an inclusive range drawn per set. Sizes below 2 make the variance
        meaningless with ``ddof=1``.
    mean_range, var_range : (float, float)
        Ranges of the uniform draws of ``mu`` and ``sigma^2``.
    ddof : int, default=0
        Delta degrees of freedom of the empirical variance (``np.var``).
    random_state : int, RandomState or None

    Returns
    -------
    X : list of ndarray of shape (n_i, 1)
    y : ndarray of shape (n_sets,)
        The empirical variance of each set.

    References
    ----------
    L. H. Zhang, V. Tozzo, J. M. Higgins, R. Ranganath. Set Norm and Equivariant Skip Connections:
    Putting the Deep in Deep Sets. ICML 2022.

    Examples
    --------
    >>> from skset.datasets import make_normal_var
    >>> X, y = make_normal_var(5, set_size=100, random_state=0)
    >>> X[0].shape, y.shape
    ((100, 1), (5,))
    """
    n_sets = _check_n_sets(n_sets)
    if isinstance(ddof, bool) or not isinstance(ddof, Integral) or ddof < 0:
        raise ValueError(f"ddof={ddof!r} must be an integer >= 0.")
    if _size_range(set_size)[0] <= ddof:  # the range, not the draws: any random_state
        raise ValueError(f"set sizes must exceed ddof={ddof}: set_size={set_size!r}.")
    rng = check_random_state(random_state)
    sizes = _sizes(set_size, n_sets, rng)
    if not (_real_pair(var_range) and 0 <= var_range[0] <= var_range[1]):
        raise ValueError(f"var_range={var_range!r} must be a pair 0 <= low <= high, both finite.")
    if not (_real_pair(mean_range) and mean_range[0] <= mean_range[1]):
        raise ValueError(f"mean_range={mean_range!r} must be a pair low <= high, both finite.")
    mu = rng.uniform(mean_range[0], mean_range[1], size=n_sets)
    var = rng.uniform(var_range[0], var_range[1], size=n_sets)
    X = [rng.normal(m, np.sqrt(v), size=(int(n), 1))
         for m, v, n in zip(mu, var, sizes, strict=True)]
    y = np.array([x[:, 0].var(ddof=ddof) for x in X])
    return X, y


def make_gaussian_mixture_sets(
    n_sets: int = 1000,
    *,
    set_size=(100, 500),
    n_components=4,
    n_features: int = 2,
    center_box: tuple[float, float] = (-4.0, 4.0),
    cluster_std: float = 1.0,
    return_centers: bool = False,
    random_state=None,
):
    """Point sets drawn from Gaussian mixtures, one mixture per set (amortised clustering).

    For each set: ``k`` centres uniform in ``center_box^n_features``, mixing weights from a flat
    Dirichlet, isotropic components of standard deviation ``cluster_std`` (Lee et al., 2019,
    Section 5.3).

    Parameters
    ----------
    n_sets : int, default=1000
    set_size : int or (int, int), default=(100, 500)
    n_components : int or (int, int), default=4
        Number of mixture components per set, fixed or drawn in an inclusive range.
    n_features : int, default=2
    center_box : (float, float), default=(-4.0, 4.0)
    cluster_std : float, default=1.0
    return_centers : bool, default=False
        Also return the centres of each set.
    random_state : int, RandomState or None

    Returns
    -------
    X : list of ndarray of shape (n_i, n_features)
    labels : list of ndarray of shape (n_i,)
        The component of each element (0..k-1).
    centers : list of ndarray of shape (k_i, n_features)
        Only with ``return_centers=True``.

    Examples
    --------
    >>> from skset.datasets import make_gaussian_mixture_sets
    >>> X, labels = make_gaussian_mixture_sets(2, set_size=50, random_state=0)
    >>> X[0].shape, labels[0].shape
    ((50, 2), (50,))
    """
    n_sets = _check_n_sets(n_sets)
    if isinstance(n_features, bool) or not isinstance(n_features, Integral) or n_features < 1:
        raise ValueError(f"n_features={n_features!r} must be a positive integer.")
    if not (_real(cluster_std) and cluster_std > 0):
        raise ValueError(f"cluster_std={cluster_std!r} must be a positive finite number.")
    if not (_real_pair(center_box) and center_box[0] <= center_box[1]):
        raise ValueError(f"center_box={center_box!r} must be a pair low <= high, both finite.")
    rng = check_random_state(random_state)
    sizes = _sizes(set_size, n_sets, rng)
    ks = _sizes(n_components, n_sets, rng, name="n_components")
    X, labels, centers = [], [], []
    for n, k in zip(sizes, ks, strict=True):
        c = rng.uniform(center_box[0], center_box[1], size=(int(k), n_features))
        w = rng.dirichlet(np.ones(int(k)))
        lab = rng.choice(int(k), size=int(n), p=w)
        X.append(c[lab] + cluster_std * rng.standard_normal((int(n), n_features)))
        labels.append(lab)
        centers.append(c)
    if return_centers:
        return X, labels, centers
    return X, labels


def make_unique_count(
    n_sets: int = 1000,
    *,
    set_size=(6, 10),
    subset: str = "train",
    test_fraction: float = 0.5,
    split_random_state: int = 0,
    random_state=None,
):
    """Sets of digit images; the target is the number of distinct digits in each set.

    The unique-counting task of Lee et al. (2019, Section 5.2) on scikit-learn's 8x8 digits in
    place of Omniglot characters. The 1,797 images are split once (stratified by digit, by
    ``split_random_state``) into a training and a test pool, so that sets drawn with
    ``subset="train"`` and ``subset="test"`` never share an image, whatever ``random_state``.
    For each set: a size ``n`` uniform in ``set_size``, a count ``c`` uniform in
    ``{1, ..., min(n, 10)}``, ``c`` distinct digits, each of them at least once and the other
    ``n - c`` elements from the same digits at random, every image drawn without replacement
    from its digit's pool, the order shuffled. With the default sizes the most frequent counts
    (1 to 6) each have probability 0.129: chance accuracy.

    Parameters
    ----------
    n_sets : int, default=1000
    set_size : int or (int, int), default=(6, 10)
        A fixed size, or an inclusive range drawn uniformly per set.
    subset : {"train", "test"}, default="train"
        The image pool to draw from.
    test_fraction : float, default=0.5
        Share of the images in the test pool.
    split_random_state : int, default=0
        Seed of the train/test split of the images (keep it equal for the two subsets).
    random_state : int, RandomState or None
        Seed of the sets.

    Returns
    -------
    X : list of ndarray of shape (n_i, 64)
        Pixel values scaled to ``[0, 1]``.
    y : ndarray of shape (n_sets,)
        The number of distinct digits in each set (int).

    References
    ----------
    J. Lee, Y. Lee, J. Kim, A. Kosiorek, S. Choi, Y. W. Teh. Set Transformer: A Framework for
    Attention-based Permutation-Invariant Neural Networks. ICML 2019.

    Examples
    --------
    >>> from skset.datasets import make_unique_count
    >>> X, y = make_unique_count(3, random_state=0)
    >>> X[0].shape[1], y.dtype.kind
    (64, 'i')
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    n_sets = _check_n_sets(n_sets)
    if subset not in ("train", "test"):
        raise ValueError(f"subset={subset!r} must be 'train' or 'test'.")
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, Real) \
            or not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction={test_fraction!r} must be a number in (0, 1).")
    if isinstance(split_random_state, bool) or not isinstance(split_random_state, Integral) \
            or not 0 <= split_random_state < 2**32:
        raise ValueError(f"split_random_state={split_random_state!r} must be an integer in "
                         "[0, 2**32).")
    d = load_digits()
    n_test = int(np.ceil(test_fraction * len(d.target)))
    if not len(np.unique(d.target)) <= n_test <= len(d.target) - len(np.unique(d.target)):
        raise ValueError(f"test_fraction={test_fraction!r} leaves a pool without every digit: "
                         "each pool needs at least one image of each of the 10 digits.")
    idx_train, idx_test = train_test_split(np.arange(len(d.target)), test_size=test_fraction,
                                           random_state=split_random_state, stratify=d.target)
    idx = idx_train if subset == "train" else idx_test
    images, labels = d.data[idx] / 16.0, d.target[idx]
    classes = np.unique(labels)
    pools = [np.flatnonzero(labels == c) for c in classes]
    if _size_range(set_size)[1] > min(len(p) for p in pools):  # the range: any random_state
        raise ValueError(f"set_size={set_size!r} exceeds the smallest digit pool "
                         f"({min(len(p) for p in pools)} images).")
    rng = check_random_state(random_state)
    sizes = _sizes(set_size, n_sets, rng)
    X, y = [], np.empty(n_sets, dtype=np.int64)
    for s, n in enumerate(sizes):
        c = rng.randint(1, min(int(n), len(classes)) + 1)
        chosen = rng.choice(len(classes), size=c, replace=False)
        digits = np.concatenate([chosen, rng.choice(chosen, size=int(n) - c)])
        rows = np.empty(int(n), dtype=np.int64)
        for k in chosen:
            at = np.flatnonzero(digits == k)
            rows[at] = rng.choice(pools[k], size=len(at), replace=False)
        X.append(images[rows[rng.permutation(int(n))]])
        y[s] = c
    return X, y
