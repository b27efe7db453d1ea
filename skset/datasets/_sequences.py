"""Synthetic sequence tasks where the positions of elements matter."""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["make_motif_order"]


def make_motif_order(
    n_samples: int = 500,
    *,
    min_length: int = 100,
    max_length: int = 300,
    alphabet_size: int = 4,
    motif_length: int = 8,
    n_motifs: int = 2,
    mutation_rate: float = 0.0,
    return_motifs: bool = False,
    random_state=None,
):
    """Random one-hot sequences in which the ORDER of planted motifs decides the class.

    Every sequence is i.i.d. uniform over an alphabet of ``alphabet_size`` letters, one-hot
    encoded, with a length drawn uniformly in ``[min_length, max_length]``. The ``n_motifs``
    motifs (fixed random words of ``motif_length`` letters, shared by all sequences) are all
    planted in every sequence, one per equal segment of the sequence (the first motif in the first
    ``1/n_motifs`` of its length, and so on, at a uniform place inside the segment). The class is
    the permutation that orders them: with two motifs, class 0 is "A then B" and class 1 is
    "B then A".
    Hence the bag of elements, and the bag of k-mers, carry no information about the class (up to
    the rare chance occurrences of the motifs in the background): a model must use where motifs are,
    e.g. an OTK embedding with positional weights (``position_sigma``). Mean pooling of any per-
    k-mer features stays near chance level.

    Parameters
    ----------
    n_samples : int, default=500
        Number of sequences.
    min_length, max_length : int, default=100, 300
        Range of sequence lengths (inclusive); ``min_length >= n_motifs * motif_length``.
    alphabet_size : int, default=4
        Letters (features per element); 4 is DNA-like.
    motif_length : int, default=8
        Letters per motif.
    n_motifs : int, default=2
        Motifs per sequence; the number of classes is ``n_motifs!`` (2 -> 2 classes, 3 -> 6).
    mutation_rate : float, default=0.0
        Probability that each planted letter is replaced by a random one (label noise-free
        difficulty knob).
    return_motifs : bool, default=False
        Also return the motifs, an int array ``(n_motifs, motif_length)`` of letters.
    random_state : int, RandomState or None, default=None
        Seed.

    Returns
    -------
    X : list of ndarray of shape (n_i, alphabet_size), float32
        One-hot sequences.
    y : ndarray of shape (n_samples,), int64
        The class: the index of the motif order among ``itertools.permutations(range(n_motifs))``.
    motifs : ndarray of shape (n_motifs, motif_length)
        Only with ``return_motifs=True``.

    Examples
    --------
    >>> from skset.datasets import make_motif_order
    >>> X, y = make_motif_order(n_samples=4, min_length=40, max_length=60, random_state=0)
    >>> len(X), X[0].shape[1], sorted(set(y.tolist())) <= [0, 1]
    (4, 4, True)
    """

    def _int(name, v, low):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")

    _int("n_samples", n_samples, 1)
    _int("alphabet_size", alphabet_size, 2)
    _int("motif_length", motif_length, 1)
    _int("n_motifs", n_motifs, 2)
    if n_motifs > 20:  # n_motifs! classes: 20! is the last that an int64 label holds
        raise ValueError(f"n_motifs must be at most 20 (n_motifs! classes), got {n_motifs!r}")
    _int("min_length", min_length, n_motifs * motif_length)
    _int("max_length", max_length, min_length)
    if isinstance(mutation_rate, bool) or not (isinstance(mutation_rate, numbers.Real)
                                                and 0 <= mutation_rate <= 1):
        raise ValueError(f"mutation_rate must be in [0, 1], got {mutation_rate!r}")
    if alphabet_size**motif_length < n_motifs:
        raise ValueError(f"n_motifs={n_motifs} distinct motifs need at least as many words of "
                         f"motif_length={motif_length} letters, but an alphabet of "
                         f"{alphabet_size} letters has {alphabet_size**motif_length}.")
    rng = check_random_state(random_state)

    # distinct motifs (redraw on the chance two coincide)
    while True:
        motifs = rng.randint(alphabet_size, size=(n_motifs, motif_length))
        if len({tuple(m) for m in motifs}) == n_motifs:
            break
    # order number k: the k-th of itertools.permutations(range(n_motifs)), decoded rather than
    # listed (11 motifs: 40 million orders)
    y = rng.randint(math.factorial(n_motifs), size=n_samples, dtype=np.int64)
    lengths = rng.randint(min_length, max_length + 1, size=n_samples)
    eye = np.eye(alphabet_size, dtype=np.float32)
    X = []
    for i in range(n_samples):
        n = int(lengths[i])
        seq = rng.randint(alphabet_size, size=n)
        seg = n // n_motifs
        for s, m in enumerate(_nth_order(int(y[i]), n_motifs)):
            start = s * seg + rng.randint(seg - motif_length + 1)
            word = motifs[m].copy()
            if mutation_rate > 0:
                flip = rng.rand(motif_length) < mutation_rate
                word[flip] = rng.randint(alphabet_size, size=int(flip.sum()))
            seq[start : start + motif_length] = word
        X.append(eye[seq])
    if return_motifs:
        return X, y, motifs
    return X, y


def _nth_order(k: int, n: int) -> list[int]:
    """The ``k``-th permutation of ``range(n)`` in ``itertools.permutations``' (lexicographic)
    order."""
    items, out = list(range(n)), []
    for i in range(n, 0, -1):
        q, k = divmod(k, math.factorial(i - 1))
        out.append(items.pop(q))
    return out
